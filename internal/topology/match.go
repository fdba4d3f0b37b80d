package topology

import (
	"slices"
	"strings"
)

// Match returns the route API Gateway chooses for a request's method and path, with the
// path's parameters. A {name} segment matches one non-empty segment, a final {name+} the
// rest of the path. Of the routes that match, a route without a greedy segment comes before
// one with, then the one with more literal segments, then a route of the request's method
// before an ANY route; of equals the first in the table, as the local emulator does. A
// request no route matches goes to the default route, when the table has one.
func (a Application) Match(method, path string) (Route, map[string]string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var best, fallback Route
	var bestParams map[string]string
	bestScore := -1
	for _, r := range a.Routes {
		if r.Default() {
			fallback = r
			continue
		}
		if r.Method != method && r.Method != "ANY" {
			continue
		}
		params, literals, greedy, ok := matchPath(r.Path, parts)
		if !ok {
			continue
		}
		score := literals * 2
		if !greedy {
			score += 1000
		}
		if r.Method == method {
			score++
		}
		if score > bestScore {
			best, bestParams, bestScore = r, params, score
		}
	}
	if bestScore < 0 && fallback.Default() {
		return fallback, map[string]string{}, true
	}
	return best, bestParams, bestScore >= 0
}

// Methods lists the methods of the routes (ANY and the default route aside) that serve path,
// in the table's order: what a 405 answer's Allow names.
func (a Application) Methods(path string) []string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var out []string
	for _, r := range a.Routes {
		if r.Method == "ANY" || r.Default() || slices.Contains(out, r.Method) {
			continue
		}
		if _, _, greedy, ok := matchPath(r.Path, parts); ok && !greedy {
			out = append(out, r.Method)
		}
	}
	return out
}

// matchPath matches a route's path template against a request path's segments.
func matchPath(template string, parts []string) (params map[string]string, literals int, greedy, ok bool) {
	segs := strings.Split(strings.Trim(template, "/"), "/")
	params = map[string]string{}
	for i, s := range segs {
		name, isParam := strings.CutPrefix(s, "{")
		name, _ = strings.CutSuffix(name, "}")
		if isParam && strings.HasSuffix(name, "+") {
			if i >= len(parts) || parts[i] == "" {
				return nil, 0, false, false
			}
			params[strings.TrimSuffix(name, "+")] = strings.Join(parts[i:], "/")
			return params, literals, true, true
		}
		if i >= len(parts) || parts[i] == "" {
			return nil, 0, false, false
		}
		if isParam {
			params[name] = parts[i]
			continue
		}
		if s != parts[i] {
			return nil, 0, false, false
		}
		literals++
	}
	return params, literals, false, len(segs) == len(parts)
}
