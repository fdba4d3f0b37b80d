package statusevent

import (
	"errors"
	"strings"
	"testing"
)

// example is the README's example event, as an EventBridge rule target receives it.
const example = `{
  "version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "source": "buyflow",
  "detail-type": "MediaBuy Status Changed", "account": "111122223333", "region": "us-east-1",
  "time": "2026-05-01T09:00:06Z", "resources": [],
  "detail": {
    "schema_version": "1", "event_id": "media_buy:op-1:6", "kind": "media_buy",
    "operation_id": "op-1", "tenant": "acme", "sequence": 6,
    "from": "submitted", "to": "completed", "seller_id": "seller-a", "media_buy_id": "mb-77",
    "amount": {"value": "15000.00", "currency": "USD"},
    "occurred_at": "2026-05-01T09:00:06Z",
    "links": {"self": "https://api.example.com/v1/media-buys/op-1", "events": "https://api.example.com/v1/media-buys/op-1/events"},
    "notify": {"slack": "U024BE7LH"}
  }
}`

func TestParseReadsTheDocumentedExample(t *testing.T) {
	ev, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	d := ev.Detail
	if d.From != "submitted" || d.To != "completed" || d.Amount.Value != "15000.00" || d.Notify.Slack != "U024BE7LH" || ev.DetailType != DetailTypeMediaBuy {
		t.Errorf("parsed %+v", ev)
	}
}

func TestParseRefusesWhatIsNotAStatusEvent(t *testing.T) {
	for name, mutate := range map[string]func(string) string{
		"other source":        func(s string) string { return strings.Replace(s, `"source": "buyflow"`, `"source": "aws.s3"`, 1) },
		"newer schema":        func(s string) string { return strings.Replace(s, `"schema_version": "1"`, `"schema_version": "2"`, 1) },
		"detail-type vs kind": func(s string) string { return strings.Replace(s, `"kind": "media_buy"`, `"kind": "campaign"`, 1) },
		"forged event id":     func(s string) string { return strings.Replace(s, `"media_buy:op-1:6"`, `"media_buy:op-2:6"`, 1) },
		"no tenant":           func(s string) string { return strings.Replace(s, `"tenant": "acme"`, `"tenant": ""`, 1) },
		"bad slack id":        func(s string) string { return strings.Replace(s, `"U024BE7LH"`, `"<!channel>"`, 1) },
		"trailing data":       func(s string) string { return s + "{}" },
		"not json":            func(string) string { return "{" },
		"too large":           func(s string) string { return s + strings.Repeat(" ", MaxEventBytes) },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(mutate(example))); !errors.Is(err, ErrNotStatusEvent) {
				t.Errorf("Parse = %v, want ErrNotStatusEvent", err)
			}
		})
	}
}

func TestCheckSlackID(t *testing.T) {
	for id, ok := range map[string]bool{
		"U024BE7LH": true, "W012A3CDE": true, "C0123456789": true, "G0123": true, "D0ABCDEF": true,
		"": false, "u024be7lh": false, "#general": false, "<@U024BE7LH>": false, "U": false, "X0123456": false,
		"U" + strings.Repeat("A", 40): false, "C0123\n": false,
	} {
		if err := CheckSlackID(id); (err == nil) != ok {
			t.Errorf("CheckSlackID(%q) = %v", id, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte(`{"source":"buyflow","detail":{"schema_version":"1"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrNotStatusEvent) {
				t.Fatalf("Parse error %v does not wrap ErrNotStatusEvent", err)
			}
			return
		}
		d := ev.Detail
		if d.EventID != EventID(d.Kind, d.OperationID, d.Sequence) || ev.Source != Source || d.Kind.DetailType() != ev.DetailType {
			t.Fatalf("Parse accepted an inconsistent event: %+v", ev)
		}
	})
}
