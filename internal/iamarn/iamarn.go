// Package iamarn recognises the IAM principals API Gateway reports for IAM-authorized callers
// (user and role ARNs, and the assumed-role sessions of a role), and the local stack's dev:
// principals, which stand for them where the emulator carries no IAM identity.
//
// It matches by hand, not with regexp: the names' counted repetitions ({1,512}) compile to
// thousands of instructions, and the approval policy and the operator list are checked at every
// cold start of the functions that read them. That compile was about 1.7 ms of each such start.
package iamarn

import (
	"strings"

	"github.com/buyflow/buyflow/internal/charclass"
)

// IsUserOrRole reports whether s is an IAM user or role ARN, with or without a path:
// arn:aws:iam::111122223333:role/ApproverAlice, arn:aws-cn:iam::111122223333:user/ops/bob.
func IsUserOrRole(s string) bool {
	_, rest, ok := cutPartition(s, "iam")
	if !ok {
		return false
	}
	if _, rest, ok = cutAccount(rest); !ok {
		return false
	}
	name, ok := strings.CutPrefix(rest, "user/")
	if !ok {
		name, ok = strings.CutPrefix(rest, "role/")
	}
	return ok && pathChars.Span(name, 1, 512)
}

// IsDevPrincipal reports whether s is a local stack principal: "dev:" and 1–64 of
// [A-Za-z0-9._-].
func IsDevPrincipal(s string) bool {
	id, ok := strings.CutPrefix(s, "dev:")
	return ok && devChars.Span(id, 1, 64)
}

// RoleOfSession returns the ARN of the role whose session s is, when s is an STS assumed-role
// ARN (arn:aws:sts::111122223333:assumed-role/ApproverAlice/alice), and whether it is one. The
// role name and the session name follow IAM's rules: 1–64 and 2–64 of [A-Za-z0-9_+=,.@-]. The
// role's path is not in a session's ARN, so the role ARN returned has none.
func RoleOfSession(s string) (string, bool) {
	partition, rest, ok := cutPartition(s, "sts")
	if !ok {
		return "", false
	}
	account, rest, ok := cutAccount(rest)
	if !ok {
		return "", false
	}
	if rest, ok = strings.CutPrefix(rest, "assumed-role/"); !ok {
		return "", false
	}
	role, session, ok := strings.Cut(rest, "/")
	if !ok || !nameChars.Span(role, 1, 64) || !nameChars.Span(session, 2, 64) {
		return "", false
	}
	return "arn:" + partition + ":iam::" + account + ":role/" + role, true
}

// cutPartition cuts "arn:<partition>:<service>::" off s, where partition is "aws" and then any
// of [a-z-] (aws, aws-cn, aws-us-gov).
func cutPartition(s, service string) (partition, rest string, ok bool) {
	rest, ok = strings.CutPrefix(s, "arn:")
	if !ok || !strings.HasPrefix(rest, "aws") {
		return "", "", false
	}
	i := len("aws")
	for i < len(rest) && (rest[i] >= 'a' && rest[i] <= 'z' || rest[i] == '-') {
		i++
	}
	partition = rest[:i]
	rest, ok = strings.CutPrefix(rest[i:], ":"+service+"::")
	return partition, rest, ok
}

// cutAccount cuts a 12-digit account id and its ':' off s.
func cutAccount(s string) (account, rest string, ok bool) {
	if len(s) < 13 || s[12] != ':' {
		return "", "", false
	}
	if !digits.Span(s[:12], 12, 12) {
		return "", "", false
	}
	return s[:12], s[13:], true
}

// The characters IAM allows in a role, user or session name; with '/', in a name's path; and
// the local stack's principals'.
var (
	nameChars = charclass.Of("A-Za-z0-9_+=,.@-")
	pathChars = charclass.Of("A-Za-z0-9_+=,.@/-")
	devChars  = charclass.Of("A-Za-z0-9._-")
	digits    = charclass.Of("0-9")
)
