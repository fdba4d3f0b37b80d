package iamarn

import (
	"regexp"
	"strings"
	"testing"
)

// The patterns the matchers replace, as AWS documents the names: the fuzz target holds the
// matchers to them.
var (
	userOrRoleRE  = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:(user|role)/[\w+=,.@/-]{1,512}$`)
	devRE         = regexp.MustCompile(`^dev:[A-Za-z0-9._-]{1,64}$`)
	assumedRoleRE = regexp.MustCompile(`^arn:(aws[a-z-]*):sts::([0-9]{12}):assumed-role/([\w+=,.@-]{1,64})/[\w+=,.@-]{2,64}$`)
)

func TestIsUserOrRole(t *testing.T) {
	for s, want := range map[string]bool{
		"arn:aws:iam::111122223333:role/ApproverAlice":               true,
		"arn:aws:iam::111122223333:user/ops/team/bob":                true,
		"arn:aws-us-gov:iam::111122223333:user/a":                    true,
		"arn:aws:iam::111122223333:role/" + strings.Repeat("r", 512): true,
		"arn:aws:iam::111122223333:role/" + strings.Repeat("r", 513): false,
		"arn:aws:iam::111122223333:role/":                            false,
		"arn:aws:iam::11112222333:role/a":                            false, // 11 digits
		"arn:aws:iam::111122223333:group/a":                          false,
		"arn:aws:sts::111122223333:assumed-role/a/bc":                false,
		"arn:aws:iam::111122223333:role/a b":                         false,
		"arn:aws:iam::111122223333:role/a\n":                         false,
		"arn:awz:iam::111122223333:role/a":                           false,
		"arn:aws:IAM::111122223333:role/a":                           false,
		"dev:alice":                                                  false,
		"":                                                           false,
	} {
		if got := IsUserOrRole(s); got != want {
			t.Errorf("IsUserOrRole(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestIsDevPrincipal(t *testing.T) {
	for s, want := range map[string]bool{
		"dev:alice": true, "dev:a.b_c-9": true, "dev:" + strings.Repeat("x", 64): true,
		"dev:" + strings.Repeat("x", 65): false, "dev:": false, "dev:a/b": false, "DEV:a": false, "dev:é": false,
	} {
		if got := IsDevPrincipal(s); got != want {
			t.Errorf("IsDevPrincipal(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestRoleOfSession(t *testing.T) {
	for s, want := range map[string]string{
		"arn:aws:sts::111122223333:assumed-role/ApproverAlice/alice":          "arn:aws:iam::111122223333:role/ApproverAlice",
		"arn:aws-cn:sts::111122223333:assumed-role/R/alice@example.com":       "arn:aws-cn:iam::111122223333:role/R",
		"arn:aws:sts::111122223333:assumed-role/R/a":                          "", // a session name has at least 2
		"arn:aws:sts::111122223333:assumed-role/R/" + strings.Repeat("s", 65): "",
		"arn:aws:sts::111122223333:assumed-role/R/x/y":                        "",
		"arn:aws:sts::111122223333:assumed-role//alice":                       "",
		"arn:aws:iam::111122223333:role/ApproverAlice":                        "",
		"arn:aws:sts::111122223333:federated-user/alice":                      "",
	} {
		got, ok := RoleOfSession(s)
		if ok != (want != "") || got != want {
			t.Errorf("RoleOfSession(%q) = %q, %v; want %q", s, got, ok, want)
		}
	}
}

// FuzzMatchersAgreeWithThePatterns holds each matcher to the regular expression it replaces.
func FuzzMatchersAgreeWithThePatterns(f *testing.F) {
	for _, s := range []string{
		"arn:aws:iam::111122223333:role/ApproverAlice", "arn:aws-cn:iam::111122223333:user/p/q",
		"arn:aws:sts::111122223333:assumed-role/ApproverAlice/alice", "arn:aws:sts::111122223333:assumed-role/R/a",
		"dev:alice", "dev:", "arn:aws:iam::111122223333:role/", "arn:aws-:sts::000000000000:assumed-role/a/b/c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsUserOrRole(s), userOrRoleRE.MatchString(s); got != want {
			t.Fatalf("IsUserOrRole(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := IsDevPrincipal(s), devRE.MatchString(s); got != want {
			t.Fatalf("IsDevPrincipal(%q) = %v, the pattern says %v", s, got, want)
		}
		role, ok := RoleOfSession(s)
		want := ""
		if m := assumedRoleRE.FindStringSubmatch(s); m != nil {
			want = "arn:" + m[1] + ":iam::" + m[2] + ":role/" + m[3]
		}
		if ok != (want != "") || role != want {
			t.Fatalf("RoleOfSession(%q) = %q, %v; the pattern says %q", s, role, ok, want)
		}
	})
}
