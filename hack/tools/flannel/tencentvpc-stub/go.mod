// A stand-in for github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc,
// which the Go module proxy does not serve (every version answers 403 "not
// available"). flannel's tencent-vpc backend is the only user; see
// v20170312/stub.go.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.21
