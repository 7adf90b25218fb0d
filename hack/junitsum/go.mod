module github.com/bootlet/bootlet/hack/junitsum

go 1.26
