// Stages used by the tests, the benchmarks and the demos: messages carrying a sequence number and
// a check word, so that every hop can be verified. RP_MSG_BYTES selects the size (multiple of 4,
// at least 8); the host mirror is ringpipe::test_message<N> (include/ringpipe/test_message.hpp).
#include <ringpipe/stage.clh>

#ifndef RP_MSG_BYTES
#define RP_MSG_BYTES 16
#endif

typedef struct {
  uint seq;
  uint check;
  uint payload[(RP_MSG_BYTES - 8) / 4];
} rp_test_msg;

// Same mixing function as ringpipe::test_mix on the host.
inline uint rp_test_mix(uint x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Passes every message on with check = mix(check ^ seq): proves this kernel saw each one.
inline bool rp_test_step(const rp_test_msg* in, rp_test_msg* out) {
  *out = *in;
  out->check = rp_test_mix(in->check ^ in->seq);
  return true;
}
RINGPIPE_MAP_KERNEL(test_map, rp_test_msg, rp_test_msg, rp_test_step)

// Keeps even sequence numbers only (filtering: returning false drops the message).
inline bool rp_test_keep_even(const rp_test_msg* in, rp_test_msg* out) {
  if (in->seq & 1u) return false;
  return rp_test_step(in, out);
}
RINGPIPE_MAP_KERNEL(test_filter_even, rp_test_msg, rp_test_msg, rp_test_keep_even)

RINGPIPE_DEFINE_RING_OPS(rp_test_msg)

// Raw kernel: passes messages on one at a time and faults with error code 42 at sequence
// number fail_at. Raw kernels that run as one work-item say so with reqd_work_group_size.
RINGPIPE_DECLARE_SIZES(test_fail_at, sizeof(rp_test_msg), sizeof(rp_test_msg))
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void test_fail_at(RINGPIPE_KERNEL_PARAMS, uint fail_at) {
  rp_begin(ctl);
  uint idle_polls = 0;
  uint state = 0;
  while (state == 0) {
    rp_test_msg m;
    uint head;
    const bool room = rp_push_space(out, &head) > 0;
    const bool got = room && rp_try_pop_rp_test_msg(in, &m);
    if (got) {
      if (m.seq == fail_at) {
        state = rp_fail(ctl, 42u);
        break;
      }
      rp_test_msg r;
      rp_test_step(&m, &r);
      rp_try_push_rp_test_msg(out, &r);
      rp_count(ctl, 1, 1);
    } else if (rp_drained(in)) {
      rp_close(out);
      state = RP_STATE_STOPPED;
      break;
    }
    uint tail;
    state = rp_poll(ctl, !got, rp_pop_available(in, &tail) == 0, &idle_polls);
  }
  rp_end(ctl, state);
}

// Raw kernel for the stall watchdog: passes messages on like test_map, but on sequence number
// stall_at it holds the message and stops beating its heart. It waits for a stop-now request
// (which the host can deliver through SVM) or, where the host cannot reach it (a batch in a
// device buffer), for spin_limit empty loops, so that every test run ends.
RINGPIPE_DECLARE_SIZES(test_stall_at, sizeof(rp_test_msg), sizeof(rp_test_msg))
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void test_stall_at(RINGPIPE_KERNEL_PARAMS, uint stall_at,
                                                                          uint spin_limit) {
  rp_begin(ctl);
  uint idle_polls = 0;
  uint state = 0;
  while (state == 0) {
    rp_test_msg m;
    uint head, tail;
    const bool room = rp_push_space(out, &head) > 0;
    const bool got = room && rp_pop_available(in, &tail) > 0;
    if (got) {
      m = *RP_SLOT(in, rp_test_msg, tail);
      if (m.seq == stall_at) {
        for (uint spins = 0; spins < spin_limit && rp_load_acquire(&ctl->stop) != RP_STOP_NOW; ++spins) {
        }
        state = RP_STATE_STOPPED;
        break;
      }
      rp_pop_commit(in, tail + 1);
      rp_test_msg r;
      rp_test_step(&m, &r);
      rp_try_push_rp_test_msg(out, &r);
      rp_count(ctl, 1, 1);
    } else if (rp_drained(in)) {
      rp_close(out);
      state = RP_STATE_STOPPED;
      break;
    }
    state = rp_poll(ctl, !got, rp_pop_available(in, &tail) == 0, &idle_polls);
  }
  rp_end(ctl, state);
}
