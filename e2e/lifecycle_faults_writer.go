//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// configMapWriter creates a ConfigMap every 100 ms in default, one request
// each with no retry, and remembers those the apiserver acknowledged, and
// how many it refused or did not answer.
type configMapWriter struct {
	admin  *kubernetes.Clientset
	mu     sync.Mutex
	acked  []string
	failed int
	done   chan struct{}
	once   sync.Once
	exited chan struct{}
}

func startConfigMapWriter(admin *kubernetes.Clientset) *configMapWriter {
	w := &configMapWriter{admin: admin, done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(w.exited)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("fault-%05d", i)
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": fmt.Sprint(i)}}
			_, err := w.admin.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{})
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, name)
			} else {
				w.failed++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// waitAcked waits until at least n writes were acknowledged.
func (w *configMapWriter) waitAcked(t testing.TB, n int) {
	Eventually(t, time.Minute, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked) >= n, fmt.Sprintf("%d ConfigMaps acknowledged, want %d", len(w.acked), n)
	})
}

func (w *configMapWriter) stop() {
	w.once.Do(func() { close(w.done) })
	<-w.exited
}

// verify returns the number of acknowledged ConfigMaps and those missing
// now, or holding other data than was written (read with retries: the node
// has converged, but a read may still time out).
func (w *configMapWriter) verify(admin *kubernetes.Clientset) (int, []string) {
	w.mu.Lock()
	acked := slices.Clone(w.acked)
	w.mu.Unlock()
	var have map[string]string
	for try := 0; try < 20; try++ {
		l, err := admin.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		if err == nil {
			have = map[string]string{}
			for _, cm := range l.Items {
				have[cm.Name] = cm.Data["n"]
			}
			break
		}
		if apierrors.IsForbidden(err) {
			break
		}
		time.Sleep(time.Second)
	}
	if have == nil {
		return len(acked), []string{"could not list the ConfigMaps"}
	}
	var lost []string
	for _, name := range acked {
		i, _ := strconv.Atoi(strings.TrimPrefix(name, "fault-"))
		if n, ok := have[name]; !ok || n != fmt.Sprint(i) {
			lost = append(lost, name)
		}
	}
	return len(acked), lost
}

// failures is how many writes the apiserver refused or did not answer.
func (w *configMapWriter) failures() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}
