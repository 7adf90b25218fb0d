//go:build e2e

package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ConnectStorm opens plain TCP connections to the apiserver's port as fast
// as loops allow and sends each a plain HTTP request, which a TLS server
// answers at once with a 400 and a close, without any crypto. It counts how
// each connection ended. Connections still in a closing listener's accept
// queue are reset (ECONNRESET) unless net.ipv4.tcp_migrate_req moves them to
// the other listener: this is the measurement with the sysctl off and on.
type ConnectStorm struct {
	mu      sync.Mutex
	counts  map[string]int
	samples map[string]string
	cancel  context.CancelFunc
	done    chan struct{}
}

// StartConnectStorm starts loops connection loops against addr.
func StartConnectStorm(t testing.TB, addr string, loops int) *ConnectStorm {
	ctx, cancel := context.WithCancel(context.Background())
	s := &ConnectStorm{counts: map[string]int{}, samples: map[string]string{}, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := 0; i < loops; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				kind, detail := connectOnce(addr)
				s.mu.Lock()
				s.counts[kind]++
				if _, ok := s.samples[kind]; !ok {
					s.samples[kind] = detail
				}
				s.mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	go func() { wg.Wait(); close(s.done) }()
	t.Cleanup(func() { s.Stop() })
	return s
}

func connectOnce(addr string) (string, string) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return classifyConnErr("connect", err), err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("GET /version HTTP/1.0\r\n\r\n")); err != nil {
		return classifyConnErr("write", err), err.Error()
	}
	data, err := io.ReadAll(conn)
	if len(data) > 0 {
		return "answered", ""
	}
	if err == nil {
		return "closed without an answer", ""
	}
	return classifyConnErr("read", err), err.Error()
}

func classifyConnErr(op string, err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return op + ": reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return op + ": refused"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return op + ": timeout"
	}
	return op + ": other"
}

// Stop stops the storm and returns the counts by outcome and a sample error
// of each.
func (s *ConnectStorm) Stop() (map[string]int, map[string]string) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	counts, samples := map[string]int{}, map[string]string{}
	for k, v := range s.counts {
		counts[k] = v
	}
	for k, v := range s.samples {
		samples[k] = v
	}
	return counts, samples
}
