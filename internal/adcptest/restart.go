package adcptest

// Restart simulates the seller's process restarting. A seller with
// ForgetTasksOnRestart loses every task, as a seller that keeps its tasks in
// memory does, so that a buyer's next poll of a task it was waiting on answers
// REFERENCE_NOT_FOUND; media buys and their deliveries stay. Without the
// option the tasks survive (a seller with durable task storage) and Restart
// changes nothing.
func (s *Seller) Restart() {
	if !s.opts.ForgetTasksOnRestart {
		return
	}
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tasks)
	s.taskOrder = nil
}
