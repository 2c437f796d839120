package server

import "github.com/switchboardhq/switchboard/store"

// Charts lets the tests take a chart sample now rather than wait a minute.
func (s *Server) Charts() *store.ChartSampler { return s.charts }
