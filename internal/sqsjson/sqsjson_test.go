package sqsjson_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/buyflow/buyflow/internal/awsjson"
	"github.com/buyflow/buyflow/internal/sqsjson"
)

// A call goes to the endpoint (else the queue URL's host) with SQS's JSON-protocol headers and
// signed; an answer decodes into out, a refusal is an *Error that says whether it may be retried.
func TestCallSpeaksSQSJSONProtocol(t *testing.T) {
	status, answer := http.StatusOK, `{"Successful":[{"Id":"0"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" || r.Header.Get("Content-Type") != "application/x-amz-json-1.0" ||
			r.Header.Get("X-Signed") != "yes" || string(body) != `{"QueueUrl":"q"}` {
			t.Errorf("request %v %s", r.Header, body)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	c := &sqsjson.Client{Sign: func(r *http.Request, _ []byte) error { r.Header.Set("X-Signed", "yes"); return nil }}
	var out struct{ Successful []struct{ Id string } }
	// No Endpoint: the queue URL's scheme and host.
	if err := c.Call(context.Background(), srv.URL+"/000000000000/q", "SendMessageBatch", map[string]string{"QueueUrl": "q"}, &out); err != nil || len(out.Successful) != 1 {
		t.Fatalf("%+v, %v", out, err)
	}
	c.Endpoint = srv.URL
	for _, tc := range []struct {
		status    int
		answer    string
		retryable bool
	}{
		{http.StatusBadRequest, `{"__type":"com.amazonaws.sqs#AccessDeniedException","message":"no"}`, false},
		{http.StatusBadRequest, `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}`, true},
		{http.StatusInternalServerError, `oops`, true},
	} {
		status, answer = tc.status, tc.answer
		err := c.Call(context.Background(), "not a url", "SendMessageBatch", map[string]string{"QueueUrl": "q"}, nil)
		var e *awsjson.Error
		if !errors.As(err, &e) || e.Status != tc.status || sqsjson.Retryable(err) != tc.retryable {
			t.Errorf("%d %s: %v (retryable %v), want retryable %v", tc.status, tc.answer, err, sqsjson.Retryable(err), tc.retryable)
		}
	}
}
