package adcp_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

func TestMetricCodeIsBounded(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("call: %w", &adcp.Error{Kind: adcp.KindAdCP, Code: "RATE_LIMITED"}), "RATE_LIMITED"},
		{&adcp.Error{Kind: adcp.KindTransport, HTTPStatus: 503}, "transport"},
		{&adcp.Error{Kind: adcp.KindAdCP, Code: "op-42 was not found"}, "invalid_code"},
		{&adcp.Error{Kind: adcp.KindAdCP, Code: strings.Repeat("X", 65)}, "invalid_code"},
		{fmt.Errorf("x: %w", adcp.ErrUnknownAgent), "unknown_agent"},
		{errors.New("boom"), "other"},
	}
	for _, c := range cases {
		if got := adcp.MetricCode(c.err); got != c.want {
			t.Errorf("MetricCode(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
