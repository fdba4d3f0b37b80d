package adcptest

import "testing"

// TestRestartForgetsTasks: a seller that keeps its tasks in memory answers REFERENCE_NOT_FOUND
// for a task after a restart, and still lists the media buy it had placed; one with durable
// tasks answers as before.
func TestRestartForgetsTasks(t *testing.T) {
	for _, forget := range []bool{true, false} {
		s, cs := startSeller(t, SellerOptions{ForgetTasksOnRestart: forget})
		placed := callT(t, cs, "create_media_buy", createArgs("sync"))
		task := callT(t, cs, "create_media_buy", createArgs("async_complete")).str("task_id")
		if task == "" {
			t.Fatal("no task")
		}
		s.Restart()
		r := poll(t, cs, "get_task_status", task)
		switch {
		case forget && r.code() != "REFERENCE_NOT_FOUND":
			t.Errorf("forgetting seller answered %s, want REFERENCE_NOT_FOUND", r.Raw)
		case !forget && r.str("status") != "submitted":
			t.Errorf("durable seller answered %s, want the task", r.Raw)
		}
		if forget && len(s.Tasks()) != 0 {
			t.Errorf("%d tasks after the restart", len(s.Tasks()))
		}
		buys := callT(t, cs, "get_media_buys", map[string]any{"media_buy_ids": []any{placed.str("media_buy_id")}, "idempotency_key": key(), "adcp_version": "3.1"})
		if got, _ := buys.get("media_buys").([]any); len(got) != 1 {
			t.Errorf("forget=%v: the placed buy is gone after the restart: %s", forget, buys.Raw)
		}
	}
}
