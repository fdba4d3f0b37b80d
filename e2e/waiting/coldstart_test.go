package waiting

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/benchtest"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/topology"
)

// coldStartRuns is how many times each function is started.
const coldStartRuns = 11

// BenchmarkColdStart starts each function's bootstrap alone, coldStartRuns times, with the
// environment the local stack gave it (its AWS endpoint and secrets included) but its runtime
// API pointed at a recorder, and measures, when the process first asks for an invocation (what
// Lambda bills as Init Duration): the wall time since the process was started, the CPU time
// it used (every thread, from /proc), and its peak RSS. Only one process starts at a time;
// the stack's own processes are idle meanwhile.
func BenchmarkColdStart(b *testing.B) {
	if skip != "" {
		b.Skip(skip)
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		b.Skip("needs Linux /proc")
	}
	polled := make(chan struct{}, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			polled <- struct{}{}
			<-r.Context().Done() // never hand out an invocation
			return
		}
		http.NotFound(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	fmt.Printf("cold start, each function alone, %d starts each: process start → first runtime poll\n", coldStartRuns)
	fmt.Printf("%-12s %10s %10s %10s %10s %10s   %s\n", "function", "p50", "max", "CPU p50", "CPU max", "peak RSS", "goal p50 ≤ 25 ms")
	for _, f := range topology.App.Functions {
		env, err := stackEnv(f.Name)
		if err != nil {
			b.Fatalf("%s: %v", f.Name, err)
		}
		env = append(env, "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String()+"/_runtime/"+f.Name)
		var wall, cpu []time.Duration
		var rss int64
		for range coldStartRuns {
			w, c, r, err := startOnce(devstack.BootstrapPath(binDir, f.Name), env, polled)
			if err != nil {
				b.Fatalf("%s: %v", f.Name, err)
			}
			wall, cpu, rss = append(wall, w), append(cpu, c), max(rss, r)
		}
		slices.Sort(wall)
		slices.Sort(cpu)
		verdict := "ok"
		if p := benchtest.Percentile(wall, 50); p > 25*time.Millisecond {
			verdict = fmt.Sprintf("over by %s", (p - 25*time.Millisecond).Round(100*time.Microsecond))
		}
		fmt.Printf("%-12s %10s %10s %10s %10s %8.1f MB   %s\n", f.Name, benchtest.Percentile(wall, 50).Round(100*time.Microsecond),
			wall[len(wall)-1].Round(100*time.Microsecond), benchtest.Percentile(cpu, 50).Round(100*time.Microsecond),
			cpu[len(cpu)-1].Round(100*time.Microsecond), float64(rss)/(1<<20), verdict)
		b.ReportMetric(benchtest.Millis(benchtest.Percentile(wall, 50)), f.Name+"-init-ms")
	}
	fmt.Println()
	for b.Loop() { // the measurement above runs once, whatever -benchtime says
	}
}

// startOnce starts bin with env, waits for its first runtime poll and measures it; the process
// is killed afterwards.
func startOnce(bin string, env []string, polled <-chan struct{}) (wall, cpu time.Duration, peakRSS int64, err error) {
	cmd := exec.Command(bin)
	cmd.Env = env
	if root, err := devstack.FindRepoRoot("."); err == nil {
		cmd.Dir = root // where the stack runs its functions
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // our own child
	select {
	case <-polled:
		wall = time.Since(start)
	case <-time.After(10 * time.Second):
		return 0, 0, 0, fmt.Errorf("no runtime poll within 10 s; output: %s", out.String())
	}
	pid := cmd.Process.Pid
	if cpu, err = cpuTime(pid); err != nil {
		return 0, 0, 0, err
	}
	if peakRSS, err = statusKB(pid, "VmHWM"); err != nil {
		return 0, 0, 0, err
	}
	return wall, cpu, peakRSS * 1024, nil
}

// cpuTime sums the CPU time of every thread of pid (schedstat: nanoseconds on a CPU).
func cpuTime(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // a thread that just exited
		}
		fields := strings.Fields(string(raw))
		if len(fields) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("schedstat %q: %w", raw, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

func statusKB(pid int, key string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// stackEnv is the environment of one of the stack's processes of fn: a child of this process
// running fn's bootstrap.
func stackEnv(fn string) ([]string, error) {
	want, err := filepath.Abs(devstack.BootstrapPath(binDir, fn))
	if err != nil {
		return nil, err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != want {
			continue
		}
		if ppid, err := statusKB(pid, "PPid"); err != nil || int(ppid) != self {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return nil, err
		}
		var env []string
		for kv := range strings.SplitSeq(string(raw), "\x00") {
			if kv != "" && !strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") {
				env = append(env, kv)
			}
		}
		return env, nil
	}
	return nil, fmt.Errorf("no running %s bootstrap started by this process", want)
}
