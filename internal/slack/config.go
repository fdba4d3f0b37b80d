package slack

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
)

// Config says how to reach Slack: a bot token or an incoming webhook URL,
// exactly one. Both are secrets; String and LogValue never print them.
type Config struct {
	BotToken   string `json:"bot_token,omitempty"`
	WebhookURL string `json:"webhook_url,omitempty"`
	// BaseURL optionally overrides the Web API root for the bot (local stack).
	BaseURL string `json:"base_url,omitempty"`
}

// ParseConfig reads the Slack secret: JSON {"bot_token":"xoxb-…"} or
// {"webhook_url":"https://hooks.slack.com/…"} (optionally with "base_url"),
// or the bare token or URL. Errors never quote the secret.
func ParseConfig(secret []byte) (Config, error) {
	s := strings.TrimSpace(string(secret))
	var c Config
	switch {
	case strings.HasPrefix(s, "{"):
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return Config{}, errors.New(`slack config: secret is not a JSON object of the form {"bot_token":"…"} or {"webhook_url":"…"}`)
		}
	case strings.HasPrefix(s, "xox"):
		c.BotToken = s
	case strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://"):
		c.WebhookURL = s
	default:
		return Config{}, errors.New("slack config: secret is neither JSON, a bot token (xox…) nor a webhook url")
	}
	if (c.BotToken == "") == (c.WebhookURL == "") {
		return Config{}, errors.New("slack config: set exactly one of bot_token and webhook_url")
	}
	return c, nil
}

// NewClient returns the Client the config describes.
func NewClient(c Config, opts ...Option) (Client, error) {
	if c.BotToken != "" && c.WebhookURL == "" {
		if c.BaseURL != "" {
			opts = append([]Option{WithBaseURL(c.BaseURL)}, opts...)
		}
		return NewBotClient(c.BotToken, opts...)
	}
	if c.WebhookURL != "" && c.BotToken == "" {
		return NewWebhookClient(c.WebhookURL, opts...)
	}
	return nil, errors.New("slack config: set exactly one of bot_token and webhook_url")
}

// Mode is "bot", "webhook" or "none".
func (c Config) Mode() string {
	switch {
	case c.BotToken != "" && c.WebhookURL == "":
		return "bot"
	case c.WebhookURL != "" && c.BotToken == "":
		return "webhook"
	default:
		return "none"
	}
}

// String names the mode only.
func (c Config) String() string { return "slack.Config{mode: " + c.Mode() + "}" }

// GoString names the mode only.
func (c Config) GoString() string { return c.String() }

// LogValue names the mode only.
func (c Config) LogValue() slog.Value { return slog.GroupValue(slog.String("mode", c.Mode())) }

// MarshalJSON names the mode only, so a config dumped as JSON leaks nothing.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Mode string `json:"mode"`
	}{c.Mode()})
}
