package stagepaths

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/localstack/apiclient"
)

func TestProbe(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Sim: "sync"})
	exs := r.finish(60 * time.Second)
	t.Logf("%+v", exs)
	t.Logf("op %+v", r.operation())
	t.Logf("timeline %v", r.timeline())
	t.Logf("seller %v", tools(r.sellerCalls("")))
	t.Logf("gov %v", tools(r.governanceCalls("")))
	t.Logf("actions %v", actions(exs))
}
