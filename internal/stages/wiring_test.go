package stages_test

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/stages"
	"github.com/buyflow/buyflow/internal/topology"
)

func TestLoadEnvReportsEveryMissingVariable(t *testing.T) {
	t.Parallel()
	for _, fn := range []string{"governance", "create", "poll"} {
		_, err := stages.LoadEnv(fn, func(string) string { return "" })
		if err == nil {
			t.Fatalf("%s: no error", fn)
		}
		f, _ := topology.App.Function(fn)
		for _, name := range f.Env {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("%s: %v does not name %s", fn, err, name)
			}
		}
	}
}

func TestLoadEnvChecksURLs(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		topology.EnvTableName: "t", topology.EnvAgentsSecretPrefix: "buyflow/agents/",
		topology.EnvCallerURI: "not a uri", topology.EnvPublicBaseURL: "https://api.example/?q=1",
	}
	_, err := stages.LoadEnv("create", func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), topology.EnvCallerURI) || !strings.Contains(err.Error(), topology.EnvPublicBaseURL) {
		t.Fatalf("err = %v, want both URLs refused", err)
	}
	env[topology.EnvCallerURI], env[topology.EnvPublicBaseURL] = "https://buyflow.example/agent", "https://api.example"
	got, err := stages.LoadEnv("create", func(k string) string { return env[k] })
	if err != nil || got[topology.EnvTableName] != "t" {
		t.Fatalf("LoadEnv = %v, %v", got, err)
	}
}
