package nodeagent

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

// etcdCallTimeout bounds each call to a member: one that does not answer
// in it counts as not healthy this round.
const etcdCallTimeout = 3 * time.Second

// etcdAPI makes the agent's calls to etcd's members (this node's own and
// its helpers', and the status of the others) with etcd's gRPC API and
// the healthcheck client's certificates. It is the API's generated stubs, not etcd's client
// library, which the daemon's binary does not link (cmd/bootlet's
// deps_test.go): the agent needs six calls and no retry logic of its own
// beyond its rounds.
type etcdAPI struct {
	creds credentials.TransportCredentials
	// conns are the round's connections, by endpoint.
	conns map[string]*grpc.ClientConn
	// byID is the endpoint of each member that answered its status.
	byID map[uint64]string
}

func newEtcdAPI(m MemberPod) (*etcdAPI, error) {
	caPEM, err := os.ReadFile(m.CAFile)
	if err != nil {
		return nil, fmt.Errorf("etcd's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("etcd's CA %s holds no certificate", m.CAFile)
	}
	pair, err := tls.LoadX509KeyPair(m.CertFile, m.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("etcd's healthcheck client: %w", err)
	}
	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return &etcdAPI{creds: credentials.NewTLS(cfg), conns: map[string]*grpc.ClientConn{}}, nil
}

func (e *etcdAPI) conn(endpoint string) (*grpc.ClientConn, error) {
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

func (e *etcdAPI) Close() {
	for _, c := range e.conns {
		_ = c.Close()
	}
}

// call makes one call of endpoint's, within etcdCallTimeout.
func call[T any](ctx context.Context, e *etcdAPI, endpoint string, f func(context.Context, *grpc.ClientConn) (T, error)) (T, error) {
	c, err := e.conn(endpoint)
	if err != nil {
		var zero T
		return zero, err
	}
	cctx, cancel := context.WithTimeout(ctx, etcdCallTimeout)
	defer cancel()
	return f(cctx, c)
}

// status is one member's own status; its header names its ID.
func (e *etcdAPI) status(ctx context.Context, endpoint string) (*pb.StatusResponse, error) {
	return call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.StatusResponse, error) {
		return pb.NewMaintenanceClient(c).Status(ctx, &pb.StatusRequest{})
	})
}

// observe asks each endpoint for its status, and the first that answers
// for the member list: the members, the leader, and which answered (a
// listed member that endpoints do not name is asked at its first client
// URL).
func (e *etcdAPI) observe(ctx context.Context, endpoints []string) (members []Member, leader uint64, byID map[uint64]string, err error) {
	byID = map[uint64]string{}
	healthy := map[uint64]bool{}
	seen := func(id uint64, ep string, st *pb.StatusResponse) {
		byID[id], healthy[id] = ep, StatusHealthy(st)
	}
	var answered []string
	var errs []error
	for _, ep := range endpoints {
		st, err := e.status(ctx, ep)
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
		return nil, 0, nil, fmt.Errorf("no etcd member answers: %w", errors.Join(errs...))
	}
	// A learner refuses the list (it serves no linearizable request):
	// the next that answered is asked.
	var list *pb.MemberListResponse
	for _, ep := range answered {
		if list, err = e.memberList(ctx, ep); err == nil {
			break
		}
		errs = append(errs, fmt.Errorf("etcd's member list from %s: %w", ep, err))
	}
	if list == nil {
		return nil, 0, nil, errors.Join(errs...)
	}
	for _, m := range list.Members {
		if _, ok := byID[m.ID]; !ok && len(m.ClientURLs) > 0 {
			// Another node's member: the step of one of two restarts
			// only while the other answers too.
			if st, err := e.status(ctx, m.ClientURLs[0]); err == nil && st.Header != nil && st.Header.MemberId == m.ID {
				seen(m.ID, m.ClientURLs[0], st)
			}
		}
		members = append(members, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner, Healthy: healthy[m.ID]})
	}
	return members, leader, byID, nil
}

// StatusHealthy: a member's own status says it follows a leader and
// raises no error (an alarm such as NOSPACE), so it is a voter the quorum
// may count on, not merely a process that answers.
func StatusHealthy(st *pb.StatusResponse) bool {
	return st.Leader != 0 && len(st.Errors) == 0
}

func (e *etcdAPI) memberList(ctx context.Context, endpoint string) (*pb.MemberListResponse, error) {
	return call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberListResponse, error) {
		return pb.NewClusterClient(c).MemberList(ctx, &pb.MemberListRequest{Linearizable: true})
	})
}

func (e *etcdAPI) addLearner(ctx context.Context, endpoint, peerURL string) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberAddResponse, error) {
		return pb.NewClusterClient(c).MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{peerURL}, IsLearner: true})
	})
	return err
}

func (e *etcdAPI) promote(ctx context.Context, endpoint string, id uint64) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberPromoteResponse, error) {
		return pb.NewClusterClient(c).MemberPromote(ctx, &pb.MemberPromoteRequest{ID: id})
	})
	return err
}

func (e *etcdAPI) remove(ctx context.Context, endpoint string, id uint64) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MemberRemoveResponse, error) {
		return pb.NewClusterClient(c).MemberRemove(ctx, &pb.MemberRemoveRequest{ID: id})
	})
	return err
}

// moveLeader asks the leader, at endpoint, to hand its leadership to
// target (etcd accepts the request only from the leader).
func (e *etcdAPI) moveLeader(ctx context.Context, endpoint string, target uint64) error {
	_, err := call(ctx, e, endpoint, func(ctx context.Context, c *grpc.ClientConn) (*pb.MoveLeaderResponse, error) {
		return pb.NewMaintenanceClient(c).MoveLeader(ctx, &pb.MoveLeaderRequest{TargetID: target})
	})
	return err
}
