package breaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// settingsKey is the key of an agent's registry settings (internal/registry Record.Settings)
// that holds its breaker's thresholds.
const settingsKey = "circuit_breaker"

// Settings are the thresholds of one agent's breaker.
type Settings struct {
	// Failures is how many consecutive transient failures open the breaker.
	Failures int
	// Window bounds the quiet between them: a failed call that began more than Window after
	// the previous failure ended starts the count again. It is measured from a call's start,
	// not its end, so calls that each hang until their timeout still count as consecutive.
	Window time.Duration
	// Cooldown is how long an open breaker refuses every call before it lets one probe through.
	Cooldown time.Duration
	// ProbeTimeout is how long a probe may take before it counts as lost (its function died)
	// and another caller may claim the next one. It outlasts one AdCP call (30 s).
	ProbeTimeout time.Duration
}

// Defaults are the thresholds of an agent whose settings name none.
var Defaults = Settings{Failures: 5, Window: time.Minute, Cooldown: time.Minute, ProbeTimeout: 45 * time.Second}

// settingsDoc is the JSON form under SettingsKey; every field is optional.
type settingsDoc struct {
	Failures            *int `json:"failures"`
	WindowSeconds       *int `json:"window_seconds"`
	CooldownSeconds     *int `json:"cooldown_seconds"`
	ProbeTimeoutSeconds *int `json:"probe_timeout_seconds"`
}

// ParseSettings reads the breaker thresholds from an agent's settings object (the whole
// object; only SettingsKey is read): Defaults for what it does not set. Every problem is
// reported at once.
func ParseSettings(agentSettings json.RawMessage) (Settings, error) {
	s := Defaults
	if len(agentSettings) == 0 {
		return s, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(agentSettings, &all); err != nil {
		return s, fmt.Errorf("settings must be a JSON object: %w", err)
	}
	raw, ok := all[settingsKey]
	if !ok {
		return s, nil
	}
	var doc settingsDoc
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return s, fmt.Errorf("%s must be an object of failures, window_seconds, cooldown_seconds and probe_timeout_seconds (whole numbers): %w", settingsKey, err)
	}
	var problems []string
	set := func(v *int, name string, lo, hi int, apply func(int)) {
		if v == nil {
			return
		}
		if *v < lo || *v > hi {
			problems = append(problems, fmt.Sprintf("%s.%s must be %d to %d", settingsKey, name, lo, hi))
			return
		}
		apply(*v)
	}
	secs := func(d *time.Duration) func(int) { return func(n int) { *d = time.Duration(n) * time.Second } }
	set(doc.Failures, "failures", 1, 1000, func(n int) { s.Failures = n })
	set(doc.WindowSeconds, "window_seconds", 1, 86400, secs(&s.Window))
	set(doc.CooldownSeconds, "cooldown_seconds", 1, 86400, secs(&s.Cooldown))
	set(doc.ProbeTimeoutSeconds, "probe_timeout_seconds", 31, 900, secs(&s.ProbeTimeout))
	if len(problems) > 0 {
		return Defaults, errors.New(strings.Join(problems, "; "))
	}
	return s, nil
}
