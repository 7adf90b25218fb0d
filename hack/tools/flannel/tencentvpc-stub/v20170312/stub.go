// Package v20170312 stands in for the Tencent Cloud VPC API client that
// flannel's tencent-vpc backend (github.com/flannel-io/flannel/pkg/backend/tencentvpc)
// compiles against. The real module is not served by the Go module proxy, and
// flanneld's main imports every backend, so this stub lets hack/tools/flannel
// build upstream's unmodified main package. It declares exactly what that
// backend uses; every call fails, so selecting Backend.Type "tencent-vpc"
// fails at RegisterNetwork with errUnavailable. bootlet's clusters use vxlan.
package v20170312

import "errors"

var errUnavailable = errors.New("tencent-vpc backend is not built into this flanneld (bootlet: tencentcloud-sdk-go/tencentcloud/vpc is not on the module proxy)")

// Filter is a DescribeRouteTables filter.
type Filter struct {
	Name   *string
	Values []*string
}

// Route is one route of a route table.
type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteId              *uint64
	RouteType            *string
	Enabled              *bool
}

// RouteTable is a VPC route table.
type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

// DescribeRouteTablesRequest asks for the route tables matching Filters.
type DescribeRouteTablesRequest struct {
	Filters []*Filter
}

// DescribeRouteTablesResponse holds the route tables found.
type DescribeRouteTablesResponse struct {
	Response *struct {
		RouteTableSet []*RouteTable
	}
}

// DeleteRoutesRequest deletes Routes from RouteTableId.
type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// DeleteRoutesResponse is DeleteRoutes' answer.
type DeleteRoutesResponse struct{}

// CreateRoutesRequest adds Routes to RouteTableId.
type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// CreateRoutesResponse is CreateRoutes' answer.
type CreateRoutesResponse struct{}

// Client is the VPC API client; every method fails with errUnavailable.
type Client struct{}

// NewClientWithSecretId returns a Client whose calls all fail (the backend
// ignores this error and checks the calls').
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return &Client{}, errUnavailable
}

// NewDescribeRouteTablesRequest returns an empty request.
func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}

// NewDeleteRoutesRequest returns an empty request.
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

// NewCreateRoutesRequest returns an empty request.
func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

// DescribeRouteTables fails with errUnavailable.
func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errUnavailable
}

// DeleteRoutes fails with errUnavailable.
func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, errUnavailable
}

// CreateRoutes fails with errUnavailable.
func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, errUnavailable
}
