package adcptest

import (
	"strconv"
	"strings"
)

// script is the set of simulation tokens a request carries (see doc.go).
type script map[string]int

// parseScript reads tokens from context.sim, from a po_number of the form
// "sim:<tokens>" and from scripts registered for a po_number (byPO), on the
// arguments and, for check_governance, on the proposed payload.
func parseScript(args map[string]any, byPO map[string]string) script {
	s := script{}
	read := func(m map[string]any) {
		if m == nil {
			return
		}
		if ctx, ok := m["context"].(map[string]any); ok {
			if v, ok := ctx["sim"].(string); ok {
				s.add(v)
			}
		}
		if po, ok := m["po_number"].(string); ok {
			if v, ok := strings.CutPrefix(po, "sim:"); ok {
				s.add(v)
			} else if v, ok := byPO[po]; ok {
				s.add(v)
			}
		}
	}
	read(args)
	if p, ok := args["payload"].(map[string]any); ok {
		read(p)
	}
	return s
}

// add parses "tok1,tok2*3 tok3" (comma, space, '+' or ';' separated).
func (s script) add(v string) {
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '+' || r == ';' }) {
		name, n := f, 1
		if i := strings.IndexByte(f, '*'); i > 0 {
			if k, err := strconv.Atoi(f[i+1:]); err == nil && k > 0 {
				name, n = f[:i], k
			}
		}
		s[strings.ToLower(name)] += n
	}
}

func (s script) count(tok string) int { return s[tok] }

func (s script) has(tok string) bool { return s[tok] > 0 }

// first returns the first of toks the script carries, or "".
func (s script) first(toks ...string) string {
	for _, t := range toks {
		if s.has(t) {
			return t
		}
	}
	return ""
}

// Script registers simulation tokens (same grammar as context.sim) for every
// request whose po_number — or, for check_governance, whose payload's
// po_number — equals po. Registering "" for po removes the script.
func (a *agent) Script(po, tokens string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tokens == "" {
		delete(a.byPO, po)
		return
	}
	a.byPO[po] = tokens
}

func (a *agent) parse(args map[string]any) script {
	a.mu.Lock()
	defer a.mu.Unlock()
	return parseScript(args, a.byPO)
}
