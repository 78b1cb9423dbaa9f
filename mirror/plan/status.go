package plan

import (
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Status reports the partition for DescribeMirrors and heartbeats (SPEC
// §6.11), as of the latest Tick or fetch response time. lmle is the LMLE
// used by the current run, or the recorded one once STOPPING/STOPPED.
func (m *Machine) Status() *twinlogv1.MirrorPartitionStatus {
	st := &twinlogv1.MirrorPartitionStatus{
		Mirror:                m.cfg.Mirror,
		Topic:                 m.cfg.TopicPartition.Topic,
		Partition:             m.cfg.TopicPartition.Partition,
		State:                 m.state,
		DesiredState:          m.desired.State,
		Lmle:                  m.run.LmleUsed,
		SourceHighWatermark:   int64(m.srcHW),
		SourceLogEndOffset:    int64(m.srcLEO),
		HighWatermark:         int64(m.log.HighWatermark()),
		LogEndOffset:          int64(m.log.LogEndOffset()),
		SkippedReplicas:       append([]int32(nil), m.run.SkippedReplicas...),
		LastError:             m.run.LastError,
		RetryCount:            m.run.RetryCount,
		LeaderId:              -1,
		LeaderEpoch:           int32(m.le),
		ReportedAtMs:          m.nowMs,
		SourceFetchAgeSeconds: -1,
	}
	if m.fetchedMs > 0 {
		st.SourceFetchAgeSeconds = float64(max(0, m.nowMs-m.fetchedMs)) / 1000
	}
	if m.leader {
		st.LeaderId = int32(m.cfg.BrokerID)
	}
	if m.state == Stopping || m.state == Stopped {
		st.Lmle = m.run.LmleRecorded
	}
	if m.lmle != nil {
		st.Taints = taintsToProto(taintsFromProto(m.lmle.Taints))
	}
	if m.state == Mirroring && m.srcHW >= 0 {
		st.LagRecords, st.LagSeconds = m.lag.Lag(m.srcHW, m.log.HighWatermark(), m.nowMs)
	}
	return st
}
