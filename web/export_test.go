package web

// QueuedLists reports how many lists of a tenant's type wait for the read queued
// behind the one in flight: for tests of shared reads.
func (s *Server) QueuedLists(tenant, typ string) int { return s.lists.Queued(listKey{tenant, typ}) }
