package httpapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// refusalPackages are the packages whose code answers HTTP requests (internal/…): every
// refusal they give is built here (Error), by one of their refusal helpers, or from a code
// constant.
var refusalPackages = []string{"httpapi", "buy", "submit", "modify", "campaign", "webhook", "webhookauth", "approve", "agents"}

// codeArg names the refusal helpers and the position of their code argument: httpapi.Error
// and the packages' own refuse(status, code, …), the webhook's fail(code, err) and
// failWith(code, message, err) (a 503), buy's
// and modify's badRequest/unprocessable(code, …), buy.AmountAt(raw, currency, field, code).
var codeArg = map[string]int{"Error": 1, "refuse": 1, "fail": 0, "failWith": 0, "badRequest": 0, "unprocessable": 0, "AmountAt": 3}

var (
	codeRE      = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	codeConstRE = regexp.MustCompile(`^[Cc]ode[A-Z]`)
)

// isStatus reports whether e is an HTTP status: a number or net/http's Status… constant.
func isStatus(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.INT
	case *ast.SelectorExpr:
		return strings.HasPrefix(e.Sel.Name, "Status")
	}
	return false
}

// refusalCodes collects every refusal code written in the packages' non-test sources.
func refusalCodes(t *testing.T) map[string]string {
	t.Helper()
	codes := map[string]string{}
	fset := token.NewFileSet()
	for _, p := range refusalPackages {
		files, err := filepath.Glob(filepath.Join("..", p, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: no sources (%v)", p, err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			add := func(e ast.Expr) {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					// Refusal codes are lower snake case; an AdCP code (MEDIA_BUY_NOT_FOUND) a
					// constant names is the seller's, not an answer of buyflow's.
					if s, err := strconv.Unquote(lit.Value); err == nil && codeRE.MatchString(s) {
						codes[s] = fset.Position(lit.Pos()).String()
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					i, ok := codeArg[name]
					// A status first, where the helper takes one: log.Error("…", "key", …) is
					// no refusal.
					if !ok || i >= len(n.Args) || i == 1 && !isStatus(n.Args[0]) {
						break
					}
					add(n.Args[i])
				case *ast.CompositeLit:
					// A refusal value: {Status: …, Code: "…"}.
					var status bool
					var code ast.Expr
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Status" {
								status = true
							} else if ok && k.Name == "Code" {
								code = kv.Value
							}
						}
					}
					if status && code != nil {
						add(code)
					}
				case *ast.ValueSpec:
					for i, id := range n.Names {
						// Code constants (CodeConcurrentWrite, CodeNotPlaced, …) and the table
						// of webhook signature codes (webhookauth's codes).
						switch {
						case codeConstRE.MatchString(id.Name) && i < len(n.Values):
							add(n.Values[i])
						case p == "webhookauth" && id.Name == "codes":
							ast.Inspect(n, func(m ast.Node) bool {
								if e, ok := m.(ast.Expr); ok {
									add(e)
								}
								return true
							})
						}
					}
				}
				return true
			})
		}
	}
	return codes
}

// docCodes are the codes docs/buyer.md's refusal table lists: the first cell of each row.
func docCodes(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "buyer.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Every refusal code\n")
	if !ok {
		t.Fatal(`docs/buyer.md has no "## Every refusal code" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)`((?:, `[a-z0-9_]+`)*) \\|")
	var out []string
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		out = append(out, m[1])
		for _, more := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(m[2], -1) {
			out = append(out, more[1])
		}
	}
	return out
}

// The buyer's guide lists every code an HTTP handler answers, and no code none answers: a
// new refusal is documented where a caller looks it up.
func TestEveryRefusalCodeIsDocumented(t *testing.T) {
	codes := refusalCodes(t)
	if len(codes) < 40 {
		t.Fatalf("found only %d refusal codes in the sources: the scan is broken", len(codes))
	}
	documented := docCodes(t)
	for code, where := range codes {
		if !slices.Contains(documented, code) {
			t.Errorf("code %s (%s) is not in docs/buyer.md's refusal table", code, where)
		}
	}
	for _, code := range documented {
		if _, ok := codes[code]; !ok {
			t.Errorf("docs/buyer.md lists %s, which no handler answers", code)
		}
	}
}
