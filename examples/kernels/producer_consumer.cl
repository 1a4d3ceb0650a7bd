// The producer_consumer demo's two kernels. The producer numbers its messages and stamps each
// with a check word; the consumer checks, on its device, that they arrive in order with the right
// check words, sums them, and at the end of the stream emits one summary. The host mirrors are in
// producer_consumer.cpp.
#include <ringpipe/stage.clh>

typedef struct {
  uint seq;
  uint check;
  uint payload[2];
} demo_msg;

typedef struct {
  ulong count;      // messages seen
  ulong sum;        // sum of their check words
  uint expected;    // next sequence number expected
  uint errors;      // messages out of order or with a wrong check word
  uint first_error; // sequence number expected at the first error
  uint pad;
} demo_summary;

// Knuth's multiplicative hash: cheap, and different for every sequence number.
inline uint demo_check(uint seq) { return seq * 2654435761u ^ 0x5bd1e995u; }

// Writes messages 0 .. count-1, as many per round as there is room for, then closes its output.
// Where it resumes after a relaunch is its own msgs_out counter, kept in the control block.
RINGPIPE_DECLARE_SIZES(produce, 0, sizeof(demo_msg))
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void produce(RINGPIPE_KERNEL_PARAMS, uint count) {
  rp_begin(ctl);
  uint idle_polls = 0;
  uint state = 0;
  while (state == 0) {
    const uint done = rp_load_relaxed(&ctl->msgs_out);
    if (done >= count) {
      rp_close(out);
      state = RP_STATE_STOPPED;
      break;
    }
    uint head;
    const uint n = min(min(rp_push_space(out, &head), count - done), 256u);
    for (uint i = 0; i < n; ++i) {
      __global demo_msg* m = RP_SLOT(out, demo_msg, head + i);
      m->seq = done + i;
      m->check = demo_check(done + i);
      m->payload[0] = m->payload[1] = 0;
    }
    if (n > 0) {
      rp_push_commit(out, head + n);
      rp_count(ctl, 0, n);
    }
    state = rp_poll(ctl, n == 0, true, &idle_polls);
  }
  rp_end(ctl, state);
}

// Checks and sums every message, in order; at the end of the stream emits the totals. The state
// (the running totals) lives on the device across relaunches; RINGPIPE_STATEFUL_KERNEL does the
// polling, publishing and end-of-stream handling.
inline bool verify_one(__global demo_summary* st, const demo_msg* m, demo_summary* unused) {
  if (m->seq != st->expected || m->check != demo_check(m->seq)) {
    if (st->errors == 0) st->first_error = st->expected;
    st->errors += 1;
  }
  st->expected = m->seq + 1;
  st->count += 1;
  st->sum += m->check;
  return false;  // nothing per message
}
inline bool verify_end(__global demo_summary* st, demo_summary* out) {
  *out = *st;
  return true;
}
RINGPIPE_STATEFUL_KERNEL(verify, demo_msg, demo_summary, demo_summary, verify_one, verify_end)
