package devstack

import (
	"net/http"
	"net/http/pprof"
)

// ServeProfiles serves Go's runtime profiles (net/http/pprof's /debug/pprof/ pages) at addr, a
// loopback address, so that a soak can see where this process's memory goes
// (scripts/soak-memory.sh reads /debug/pprof/heap). It returns the base URL and a function
// that stops the server. The handlers are on a mux of their own: importing net/http/pprof
// registers them on http.DefaultServeMux too, which no server of the stack uses.
func ServeProfiles(addr string) (string, func(), error) {
	ln, err := listen(addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := serve(ln, mux)
	return srv.url(), srv.close, nil
}
