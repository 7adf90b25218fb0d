// Command testserver is the workload used by bootlet's e2e tests
// (image bootlet.dev/testserver:1). It serves:
//
//   - HTTP on $HTTP_PORT (default 8080):
//     /healthz  200 "ok", or 500 while the file /tmp/unhealthy exists
//     /echo     echoes the request (method, path, query, headers, body)
//     /env      prints the process environment
//     /hostname prints the hostname
//     /         "testserver" banner
//   - a raw TCP echo listener on $TCP_PORT (default 8081)
//   - the gRPC health service grpc.health.v1.Health on $GRPC_PORT
//     (default 9090); it reports NOT_SERVING while /tmp/unhealthy exists.
//
// It exits 0 on SIGTERM/SIGINT (after $SHUTDOWN_DELAY, e.g. "2s", if set).
//
// `testserver get [-ca FILE] [-token-file FILE] URL` is a client instead:
// one GET (Go's resolver, so the pod's resolv.conf search path applies; the
// server certificate verified against FILE), the status and body printed,
// exit 0 only on 200. The add-ons e2e test reaches https://kubernetes.default.svc
// with it, as an in-cluster client would.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const unhealthyFile = "/tmp/unhealthy"

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func healthy() bool {
	_, err := os.Stat(unhealthyFile)
	return err != nil
}

// get is the client mode; see the package doc.
func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	caFile := fs.String("ca", "", "PEM bundle the server certificate must chain to")
	tokenFile := fs.String("token-file", "", "file holding a bearer token to send")
	timeout := fs.Duration("timeout", 5*time.Second, "the whole request's timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: testserver get [-ca FILE] [-token-file FILE] URL")
	}
	tr := &http.Transport{}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s holds no certificate", *caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	req, err := http.NewRequest(http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return err
	}
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := (&http.Client{Transport: tr, Timeout: *timeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("%s\n%s", resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", fs.Arg(0), resp.Status)
	}
	return nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		if err := get(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "testserver get:", err)
			os.Exit(1)
		}
		return
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	httpPort := env("HTTP_PORT", "8080")
	tcpPort := env("TCP_PORT", "8081")
	grpcPort := env("GRPC_PORT", "9090")

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !healthy() {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		fmt.Fprintf(w, "%s %s\n", r.Method, r.URL.RequestURI())
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range r.Header[k] {
				fmt.Fprintf(w, "%s: %s\n", k, v)
			}
		}
		if msg := r.URL.Query().Get("msg"); msg != "" {
			fmt.Fprintf(w, "\n%s\n", msg)
		}
		if len(body) > 0 {
			fmt.Fprintf(w, "\n%s", body)
		}
	})
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		for _, e := range os.Environ() {
			fmt.Fprintln(w, e)
		}
	})
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, r *http.Request) {
		h, _ := os.Hostname()
		fmt.Fprintln(w, h)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "testserver")
	})
	httpSrv := &http.Server{Addr: ":" + httpPort, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		log.Printf("http listening on :%s", httpPort)
		if err := httpSrv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Fatalf("http: %v", err)
		}
	}()

	tcpLn, err := net.Listen("tcp", ":"+tcpPort)
	if err != nil {
		log.Fatalf("tcp: %v", err)
	}
	log.Printf("tcp echo listening on :%s", tcpPort)
	go func() {
		for {
			c, err := tcpLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()

	grpcLn, err := net.Listen("tcp", ":"+grpcPort)
	if err != nil {
		log.Fatalf("grpc: %v", err)
	}
	grpcSrv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(grpcSrv, hs)
	go func() {
		for {
			st := healthpb.HealthCheckResponse_SERVING
			if !healthy() {
				st = healthpb.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("", st)
			time.Sleep(500 * time.Millisecond)
		}
	}()
	go func() {
		log.Printf("grpc health listening on :%s", grpcPort)
		if err := grpcSrv.Serve(grpcLn); err != nil {
			log.Fatalf("grpc: %v", err)
		}
	}()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	s := <-sig
	log.Printf("got %v, shutting down", s)
	if d, err := time.ParseDuration(os.Getenv("SHUTDOWN_DELAY")); err == nil && d > 0 {
		time.Sleep(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = httpSrv.Shutdown(ctx)
	grpcSrv.Stop()
	tcpLn.Close()
	log.Printf("bye")
}
