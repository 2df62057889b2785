// Command gofloor is a do-nothing scheduler extender in Go: the compiled floor that
// benchmarks/http_latency.py measures beside the Python floor, in the same run.
//
// Every POST decodes its body with encoding/json into extenderv1.ExtenderArgs (kube-scheduler's
// own types, so the real decode cost of a v1.Pod and, in NodeList mode, of every v1.Node) and
// answers with encoding/json:
//
//	POST /filter      ExtenderFilterResult passing every candidate: NodeNames (nodeCacheCapable)
//	                  or Nodes (the NodeList as received), empty FailedNodes maps
//	POST /prioritize  HostPriorityList with score 0 for every candidate
//	POST /noop        the Python floor's fixed small answer, after the same decode
//	POST /noop-raw    body read, no decode, the same fixed answer (the HTTP floor)
//	GET  /readyz      200, the Go version the binary was built with (runtime.Version())
//
// No decision, no state. net/http with keep-alive; exits cleanly on SIGTERM or SIGINT.
//
//	gofloor -listen 127.0.0.1:18889
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// noopAnswer is benchmarks/extender_app.py's NOOP_ANSWER, byte for byte.
const noopAnswer = `{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}` + "\n"

func decode(w http.ResponseWriter, r *http.Request) (*extenderv1.ExtenderArgs, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	var args extenderv1.ExtenderArgs
	if err := json.Unmarshal(body, &args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return &args, true
}

func write(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func answer(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	write(w, body)
}

// candidates are the node names the request offers, in either mode.
func candidates(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	if args.Nodes == nil {
		return nil
	}
	names := make([]string, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		names[i] = args.Nodes.Items[i].Name
	}
	return names
}

func filter(w http.ResponseWriter, r *http.Request) {
	args, ok := decode(w, r)
	if !ok {
		return
	}
	result := extenderv1.ExtenderFilterResult{
		FailedNodes:                extenderv1.FailedNodesMap{},
		FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
	}
	if args.NodeNames != nil {
		names := *args.NodeNames
		result.NodeNames = &names
	} else {
		result.Nodes = args.Nodes
	}
	answer(w, &result)
}

func prioritize(w http.ResponseWriter, r *http.Request) {
	args, ok := decode(w, r)
	if !ok {
		return
	}
	names := candidates(args)
	list := make(extenderv1.HostPriorityList, len(names))
	for i, name := range names {
		list[i] = extenderv1.HostPriority{Host: name, Score: 0}
	}
	answer(w, list)
}

func noop(w http.ResponseWriter, r *http.Request) {
	if _, ok := decode(w, r); ok {
		write(w, []byte(noopAnswer))
	}
}

func noopRaw(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	write(w, []byte(noopAnswer))
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18889", "host:port to serve on")
	flag.Parse()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", filter)
	mux.HandleFunc("POST /prioritize", prioritize)
	mux.HandleFunc("POST /noop", noop)
	mux.HandleFunc("POST /noop-raw", noopRaw)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { write(w, []byte(runtime.Version()+"\n")) })
	server := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 30 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, 1)
	go func() { errs <- server.ListenAndServe() }()
	fmt.Fprintf(os.Stderr, "gofloor: serving on %s\n", *listen)
	select {
	case err := <-errs:
		log.Fatalf("gofloor: %v", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("gofloor: shutdown: %v", err)
	}
}
