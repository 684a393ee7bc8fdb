package agent

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/foreman-sched/foreman/httpapi"
)

// TestPprofOnlyWhenAsked: /debug/pprof is served with --pprof and falls
// through to the API (404 here) without it.
func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		on   bool
		want int
	}{{false, http.StatusNotFound}, {true, http.StatusOK}} {
		h := routes(httpapi.NewACL(false, nil, nil, nil), http.NotFoundHandler(), http.NotFoundHandler(), http.NotFoundHandler(), tc.on, false)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != tc.want {
				t.Errorf("pprof=%v GET %s: %d, want %d", tc.on, path, rec.Code, tc.want)
			}
		}
	}
}
