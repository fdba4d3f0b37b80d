package slack

import "testing"

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, secret, mode string
		wantErr            bool
	}{
		{name: "json bot", secret: `{"bot_token":"` + botToken + `"}`, mode: "bot"},
		{name: "json bot with base url", secret: `{"bot_token":"` + botToken + `","base_url":"http://127.0.0.1:4599/api/"}`, mode: "bot"},
		{name: "json webhook", secret: `{"webhook_url":"https://hooks.slack.com` + webhookPath + `"}`, mode: "webhook"},
		{name: "bare token", secret: " " + botToken + "\n", mode: "bot"},
		{name: "bare webhook", secret: "https://hooks.slack.com" + webhookPath, mode: "webhook"},
		{name: "both", secret: `{"bot_token":"` + botToken + `","webhook_url":"https://hooks.slack.com` + webhookPath + `"}`, wantErr: true},
		{name: "neither", secret: `{}`, wantErr: true},
		{name: "unknown field", secret: `{"token":"` + botToken + `"}`, wantErr: true},
		{name: "garbage", secret: `SECRET-garbage`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseConfig([]byte(tt.secret))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("config %v accepted", c)
				}
				noSecrets(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Mode() != tt.mode {
				t.Fatalf("mode = %q, want %q", c.Mode(), tt.mode)
			}
			client, err := NewClient(c)
			if err != nil {
				t.Fatal(err)
			}
			switch client.(type) {
			case *BotClient:
				if tt.mode != "bot" {
					t.Fatalf("got a bot client for %s", tt.mode)
				}
			case *WebhookClient:
				if tt.mode != "webhook" {
					t.Fatalf("got a webhook client for %s", tt.mode)
				}
			}
		})
	}
	if _, err := NewClient(Config{}); err == nil {
		t.Error("empty config accepted")
	}
}
