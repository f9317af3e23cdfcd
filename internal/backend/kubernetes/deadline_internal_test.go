package kubernetes

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// client-go's rate limiter refuses a call that would end after its
// context's deadline before that deadline comes, in words alone:
// refusedForDeadline knows those words, as client-go says them (a server
// of the test's; one call a second, the first spent).
func TestRefusedForDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	cs, err := k8s.NewForConfig(&rest.Config{Host: srv.URL, QPS: 1, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods("default")
	if _, err := pods.Get(context.Background(), "a", metav1.GetOptions{}); refusedForDeadline(err) {
		t.Fatalf("the first call, within the limit: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = pods.Get(ctx, "a", metav1.GetOptions{})
	if ctx.Err() != nil {
		t.Skipf("the context ended before the call came back (%v): nothing to judge", err)
	}
	if !refusedForDeadline(err) {
		t.Fatalf("the second call, a second's wait away with 200 ms left: %v, want it taken for the deadline", err)
	}
	if refusedForDeadline(errors.New("pods \"a\" not found")) || refusedForDeadline(nil) {
		t.Fatal("another error taken for the deadline")
	}
}
