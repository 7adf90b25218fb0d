module github.com/bootlet/bootlet/hack/ocibuild

go 1.26
