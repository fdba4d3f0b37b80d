// Package logging builds the structured JSON logger every function uses: aws-lambda-go's
// lambdacontext handler (requestId on every line, AWS_LAMBDA_LOG_FORMAT/LEVEL honoured) behind
// a redactor that blanks the values of attributes whose keys name a secret. Task tokens,
// link signatures, webhook signatures, credentials and Slack tokens never reach a log line,
// even when a caller logs one by mistake.
package logging

import (
	"context"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Redacted replaces the value of a secret attribute.
const Redacted = "[redacted]"

// secretKeyParts are lower-case fragments of attribute keys whose values are never logged.
var secretKeyParts = []string{"token", "secret", "signature", "password", "authorization", "credential", "sig", "apikey", "api_key"}

// New returns the logger for a Lambda function.
func New() *slog.Logger { return slog.New(Redact(lambdacontext.NewLogHandler())) }

// Redact wraps h so that secret attributes are replaced by [Redacted] at any depth of groups.
func Redact(h slog.Handler) slog.Handler { return redactor{h} }

// IsSecretKey reports whether an attribute named key must never be logged.
func IsSecretKey(key string) bool {
	k := strings.ToLower(key)
	for _, part := range secretKeyParts {
		if strings.Contains(k, part) {
			return true
		}
	}
	return false
}

type redactor struct{ next slog.Handler }

func (r redactor) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r redactor) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redact(a))
		return true
	})
	return r.next.Handle(ctx, out)
}

func (r redactor) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = redact(a)
	}
	return redactor{r.next.WithAttrs(clean)}
}

func (r redactor) WithGroup(name string) slog.Handler { return redactor{r.next.WithGroup(name)} }

func redact(a slog.Attr) slog.Attr {
	if IsSecretKey(a.Key) {
		return slog.String(a.Key, Redacted)
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = redact(g)
		}
		return slog.Group(a.Key, clean...)
	}
	return slog.Attr{Key: a.Key, Value: v}
}
