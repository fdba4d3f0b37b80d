package devstack

import (
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/topology"
)

// The tap leaves alone the writes of items whose records the mapping's filter would drop on
// their keys, and taps the others (a pattern without a keys part taps every item).
func TestTapSkipsItemsTheFilterDrops(t *testing.T) {
	key := func(pk, sk string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"pk": json.RawMessage(`{"S":"` + pk + `"}`), "sk": json.RawMessage(`{"S":"` + sk + `"}`)}
	}
	s := newLedgerStream("http://127.0.0.1:1", "t", topology.App.LedgerStream)
	for _, c := range []struct {
		pk, sk string
		want   bool
	}{
		{"TENANT#a#OP#op-1", "OP", true},
		{"TENANT#a#CAMPAIGN#c-1", "CAMPAIGN", true},
		{"RECEIPT#seller#key", "RECEIPT", false},
		{"TENANT#a#OP#op-1", "EV#2026-12-02T16:00:00.000000000Z#000000000001-x", false},
	} {
		if got := s.mayPass(key(c.pk, c.sk)); got != c.want {
			t.Errorf("mayPass(%s, %s) = %t, want %t", c.pk, c.sk, got, c.want)
		}
	}
	// The tap reads a TransactWriteItems' operation, not its event.
	body := `{"TransactItems":[{"Update":{"TableName":"t","Key":{"pk":{"S":"TENANT#a#OP#op-1"},"sk":{"S":"OP"}}}},` +
		`{"Put":{"TableName":"t","Item":{"pk":{"S":"TENANT#a#OP#op-1"},"sk":{"S":"EV#1"}}}}]}`
	if keys := s.keysOf("TransactWriteItems", []byte(body)); len(keys) != 1 || string(keys[0]["sk"]) != `{"S":"OP"}` {
		t.Errorf("keysOf the transaction = %s, want the operation's key alone", keys)
	}
	all := newLedgerStream("http://127.0.0.1:1", "t", topology.StreamSource{FilterPattern: `{"eventName":["INSERT"]}`})
	if !all.mayPass(key("RECEIPT#seller#key", "RECEIPT")) {
		t.Error("a pattern without a keys part skipped an item")
	}
}
