// Package etcdapi is the daemon's client of etcd's members: the calls
// the upgrade's node agent and the masters' controller make (status, the
// member list, a learner's add and promotion, a removal, a leadership
// move), with etcd's gRPC API and a client certificate. It is the API's
// generated stubs, not etcd's client library, which the daemon's binary
// does not link (cmd/bootlet's deps_test.go): these few calls need no
// retry logic beyond their callers' rounds. It decides nothing: what to
// call is its callers' rule book.
package etcdapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// CallTimeout bounds each call to a member: one that does not answer in
// it counts as not healthy this round.
const CallTimeout = 3 * time.Second

// Member is one member of etcd's list, with whether it answered this
// round with a leader and no error (StatusHealthy).
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
	Healthy    bool
}

// Client holds one round's connections, by endpoint. It is not safe for
// concurrent use: a round owns it, and closes it.
type Client struct {
	creds credentials.TransportCredentials
	conns map[string]*grpc.ClientConn
	// byID is the endpoint of each member that answered its status.
	byID map[uint64]string
}

// New is a client with etcd's CA (caFile) and a client pair that it
// accepts (the healthcheck client's, kubeadm's for its own calls).
func New(caFile, certFile, keyFile string) (*Client, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("etcd's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("etcd's CA %s holds no certificate", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("etcd's client pair: %w", err)
	}
	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return &Client{creds: credentials.NewTLS(cfg), conns: map[string]*grpc.ClientConn{}, byID: map[uint64]string{}}, nil
}

func (e *Client) conn(endpoint string) (*grpc.ClientConn, error) {
	if c, ok := e.conns[endpoint]; ok {
		return c, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	c, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(e.creds))
	if err != nil {
		return nil, err
	}
	e.conns[endpoint] = c
	return c, nil
}

// Close closes the round's connections.
func (e *Client) Close() {
	for _, c := range e.conns {
		_ = c.Close()
	}
}

// EndpointOf is the endpoint member id answered at in the last Observe;
// "" if it did not.
func (e *Client) EndpointOf(id uint64) string { return e.byID[id] }

// call makes one call of endpoint's, within CallTimeout.
func call[T any](ctx context.Context, e *Client, endpoint string, f func(context.Context, *grpc.ClientConn) (T, error)) (T, error) {
	c, err := e.conn(endpoint)
	if err != nil {
		var zero T
		return zero, err
	}
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	return f(cctx, c)
}

// Status is one member's own status; its header names its ID.
func (e *Client) Status(ctx context.Context, endpoint string) (*pb.StatusResponse, error) {
	return call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.StatusResponse, error) {
		return pb.NewMaintenanceClient(c).Status(ctx, &pb.StatusRequest{})
	})
}

// Observe asks each endpoint for its status, and the first that answers
// for the member list: the members, the leader, and which answered (a
// listed member that endpoints do not name is asked at its first client
// URL). EndpointOf names, afterwards, where each answered.
func (e *Client) Observe(ctx context.Context, endpoints []string) (members []Member, leader uint64, err error) {
	byID := map[uint64]string{}
	healthy := map[uint64]bool{}
	seen := func(id uint64, ep string, st *pb.StatusResponse) {
		byID[id], healthy[id] = ep, StatusHealthy(st)
	}
	var answered []string
	var errs []error
	for _, ep := range endpoints {
		st, err := e.Status(ctx, ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		if st.Header != nil {
			seen(st.Header.MemberId, ep, st)
		}
		if leader == 0 {
			leader = st.Leader
		}
		answered = append(answered, ep)
	}
	if len(answered) == 0 {
		return nil, 0, fmt.Errorf("no etcd member answers: %w", errors.Join(errs...))
	}
	// A learner refuses the list (it serves no linearizable request):
	// the next that answered is asked.
	var list *pb.MemberListResponse
	for _, ep := range answered {
		if list, err = e.MemberList(ctx, ep); err == nil {
			break
		}
		errs = append(errs, fmt.Errorf("etcd's member list from %s: %w", ep, err))
	}
	if list == nil {
		return nil, 0, errors.Join(errs...)
	}
	for _, m := range list.Members {
		if _, ok := byID[m.ID]; !ok && len(m.ClientURLs) > 0 {
			// Another node's member: asked at its own address, so that
			// its health is its own, not the answering member's view.
			if st, err := e.Status(ctx, m.ClientURLs[0]); err == nil && st.Header != nil && st.Header.MemberId == m.ID {
				seen(m.ID, m.ClientURLs[0], st)
			}
		}
		members = append(members, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner, Healthy: healthy[m.ID]})
	}
	e.byID = byID
	return members, leader, nil
}

// StatusHealthy: a member's own status says it follows a leader and
// raises no error (an alarm such as NOSPACE), so it is a voter the quorum
// may count on, not merely a process that answers.
func StatusHealthy(st *pb.StatusResponse) bool {
	return st.Leader != 0 && len(st.Errors) == 0
}

// MemberList is etcd's member list, linearizable: a member cut off from
// its leader does not answer with a list it may no longer hold.
func (e *Client) MemberList(ctx context.Context, endpoint string) (*pb.MemberListResponse, error) {
	return call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberListResponse, error) {
		return pb.NewClusterClient(c).MemberList(ctx, &pb.MemberListRequest{Linearizable: true})
	})
}

// AddLearner adds a learner with peerURL; its ID is the answer's.
func (e *Client) AddLearner(ctx context.Context, endpoint, peerURL string) (uint64, error) {
	r, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberAddResponse, error) {
		return pb.NewClusterClient(c).MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{peerURL}, IsLearner: true})
	})
	if err != nil || r.Member == nil {
		return 0, err
	}
	return r.Member.ID, nil
}

// Promote makes learner id a voter; etcd refuses while it lags its
// leader.
func (e *Client) Promote(ctx context.Context, endpoint string, id uint64) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberPromoteResponse, error) {
		return pb.NewClusterClient(c).MemberPromote(ctx, &pb.MemberPromoteRequest{ID: id})
	})
	return err
}

// Remove removes member id.
func (e *Client) Remove(ctx context.Context, endpoint string, id uint64) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberRemoveResponse, error) {
		return pb.NewClusterClient(c).MemberRemove(ctx, &pb.MemberRemoveRequest{ID: id})
	})
	return err
}

// MoveLeader asks the leader, at endpoint, to hand its leadership to
// target (etcd accepts the request only from the leader).
func (e *Client) MoveLeader(ctx context.Context, endpoint string, target uint64) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MoveLeaderResponse, error) {
		return pb.NewMaintenanceClient(c).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: target})
	})
	return err
}

// Access is how a daemon reaches etcd: its own member's client URL, and
// the files of a client pair the members accept.
type Access struct {
	Endpoint                  string
	CAFile, CertFile, KeyFile string
}

// Dial is New for a.
func Dial(a Access) (*Client, error) { return New(a.CAFile, a.CertFile, a.KeyFile) }
