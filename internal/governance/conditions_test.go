package governance

import (
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

func TestApplyConditions(t *testing.T) {
	t.Parallel()
	payload := []byte(`{"packages":[{"budget":5000,"pacing":"asap"},{"budget":10}],"end_time":"2030-01-31T23:59:59Z","context":{"a":1}}`)
	tests := []struct {
		name  string
		field string
		value string
		want  string
		bad   bool
	}{
		{"bracket index", "packages[0].budget", `4000`, `{"context":{"a":1},"end_time":"2030-01-31T23:59:59Z","packages":[{"budget":4000,"pacing":"asap"},{"budget":10}]}`, false},
		{"dot index", "packages.1.budget", `9.5`, `{"context":{"a":1},"end_time":"2030-01-31T23:59:59Z","packages":[{"budget":5000,"pacing":"asap"},{"budget":9.5}]}`, false},
		{"payload prefix, new leaf", "payload.packages[0].pacing", `"even"`, `{"context":{"a":1},"end_time":"2030-01-31T23:59:59Z","packages":[{"budget":5000,"pacing":"even"},{"budget":10}]}`, false},
		{"top-level", "end_time", `"2030-01-15T00:00:00Z"`, `{"context":{"a":1},"end_time":"2030-01-15T00:00:00Z","packages":[{"budget":5000,"pacing":"asap"},{"budget":10}]}`, false},
		{"index out of range", "packages[5].budget", `1`, "", true},
		{"missing parent", "targeting.geo", `"US"`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := applyConditions(payload, []adcp.Condition{{Field: tt.field, RequiredValue: json.RawMessage(tt.value)}})
			if tt.bad {
				if err == nil {
					t.Fatalf("applied %s: %s", tt.field, got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v\nwant %s", got, err, tt.want)
			}
		})
	}
}
