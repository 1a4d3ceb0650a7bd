// Stages used by the tests, the benchmarks and the demos: messages carrying a sequence number and
// a check word, so that every hop can be verified. RP_MSG_BYTES selects the size (multiple of 4,
// at least 8); the host mirror is ringpipe::test_message<N> (tests/support/test_message.hpp).
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

// The check word a source puts on message seq (ringpipe::test_check).
inline uint rp_test_check(uint seq) { return rp_test_mix(seq * 2654435761u + 1u); }

// Passes every message on with check = mix(check ^ seq): proves this kernel saw each one.
inline bool rp_test_step(const rp_test_msg* in, rp_test_msg* out) {
  *out = *in;
  out->check = rp_test_mix(in->check ^ in->seq);
  return true;
}
RINGPIPE_MAP_KERNEL(test_map, rp_test_msg, rp_test_msg, rp_test_step)

// test_map with a slow body (2,000 mixes per message), for tests that need a kernel to fall
// behind its input. The mix is a bijection fixing only 0, so x never becomes 0 from seq + 1: the
// message is passed on as test_map would, but the compiler cannot drop the loop.
inline bool rp_test_slow_step(const rp_test_msg* in, rp_test_msg* out) {
  uint x = in->seq + 1u;
  for (uint k = 0; k < 2000u; ++k)
    x = rp_test_mix(x);
  rp_test_step(in, out);
  if (x == 0u) out->seq = ~0u;
  return true;
}
RINGPIPE_MAP_KERNEL(test_slow_map, rp_test_msg, rp_test_msg, rp_test_slow_step)

#if RP_MSG_BYTES >= 12
// test_map whose cost is the message's first payload word (mixes): farms of uneven items.
inline bool rp_test_costly_step(const rp_test_msg* in, rp_test_msg* out) {
  uint x = in->seq + 1u;
  for (uint k = 0; k < in->payload[0]; ++k)
    x = rp_test_mix(x);
  rp_test_step(in, out);
  if (x == 0u) out->seq = ~0u;
  return true;
}
RINGPIPE_MAP_KERNEL(test_costly_map, rp_test_msg, rp_test_msg, rp_test_costly_step)
#endif

// Keeps even sequence numbers only (filtering: returning false drops the message).
inline bool rp_test_keep_even(const rp_test_msg* in, rp_test_msg* out) {
  if (in->seq & 1u) return false;
  return rp_test_step(in, out);
}
RINGPIPE_MAP_KERNEL(test_filter_even, rp_test_msg, rp_test_msg, rp_test_keep_even)

// Messages of 301 bytes and alignment 1, a size no word divides: the first four bytes hold the
// sequence number (little-endian), byte k >= 4 holds (seq + k) & 0xff
// (ringpipe::testing::odd_message on the host). Keeps even sequence numbers.
typedef struct {
  uchar bytes[301];
} rp_odd_msg;
inline bool rp_odd_keep_even(const rp_odd_msg* in, rp_odd_msg* out) {
  *out = *in;
  return (in->bytes[0] & 1u) == 0;
}
RINGPIPE_MAP_KERNEL(test_odd_filter_even, rp_odd_msg, rp_odd_msg, rp_odd_keep_even)

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
// device buffer), for spin_limit spins, so that every test run ends. Where the driver limits
// loops (llvmpipe ends a launch's loops after 65535 iterations), a spin is 2048 xorshift steps with
// no loop (about 6 us; a compiler folds chains of affine steps), so that the kernel is held there
// for longer than a stall timeout too.
#define RP_SPIN_STEP x ^= x << 13; x ^= x >> 17; x ^= x << 5;
#define RP_SPIN_16 RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP \
  RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP RP_SPIN_STEP
#define RP_SPIN_256 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 \
  RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16 RP_SPIN_16
#define RP_SPIN_1024 RP_SPIN_256 RP_SPIN_256 RP_SPIN_256 RP_SPIN_256
#if defined(RINGPIPE_LOOPS_LIMITED)
#define RP_SPIN_BODY RP_SPIN_1024 RP_SPIN_1024
#else
#define RP_SPIN_BODY  // a long body slows other compilers for nothing (PoCL: seconds)
#endif
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
        uint x = m.seq | 1u; /* xorshift: never 0 */
        for (uint spins = 0; spins < spin_limit && rp_load_acquire(&ctl->stop) != RP_STOP_NOW; ++spins) {
          RP_SPIN_BODY
        }
        if (x == 1u) rp_store_relaxed(&ctl->heartbeat, 0u); /* keeps the steps: x is used */
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

// Kernel source: produces messages 0 .. count-1 as ringpipe::make_test_message does, then closes
// its output. The group writes up to local-size messages per round. Where it resumes after a
// relaunch is its own msgs_out counter, kept in the control block across launches.
RINGPIPE_DECLARE_SIZES(test_source, 0, sizeof(rp_test_msg))
__kernel void test_source(RINGPIPE_KERNEL_PARAMS, uint count) {
  __local uint base, n, head, leave;
  const uint i = get_local_id(0);
  if (i == 0) rp_begin(ctl);
  for (;;) {
    if (i == 0) {
      uint idle_polls = 0;
      n = 0;
      leave = 0;
      for (;;) {
        const uint done = rp_load_relaxed(&ctl->msgs_out);
        if (done >= count) {
          rp_close(out);
          leave = RP_STATE_STOPPED;
          break;
        }
        uint h;
        const uint take = min(min(rp_push_space(out, &h), count - done), (uint)get_local_size(0));
        leave = rp_poll(ctl, take == 0, true, &idle_polls);
        if (leave != 0) break;
        if (take > 0) {
          n = take;
          base = done;
          head = h;
          break;
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (leave != 0) break;
    if (i < n) {
      // Written field by field into the slot: large messages never sit in private memory.
      __global rp_test_msg* m = RP_SLOT(out, rp_test_msg, head + i);
      const uint seq = base + i;
      m->seq = seq;
      m->check = rp_test_check(seq);
      for (uint w = 0; w < (RP_MSG_BYTES - 8) / 4; ++w)
        m->payload[w] = seq + w;
    }
#if defined(RINGPIPE_C11_ATOMICS)
    atomic_work_item_fence(CLK_GLOBAL_MEM_FENCE, memory_order_release, RP_SCOPE);
#endif
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (i == 0) {
      rp_push_commit(out, head + n);
      rp_count(ctl, 0, n);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (i == 0) rp_end(ctl, leave);
}

// The summary test_verify emits at the end of the stream (ringpipe::test_summary).
typedef struct {
  ulong count;       // messages seen
  ulong sum;         // sum of their check words
  uint expected;     // next sequence number expected
  uint errors;       // messages out of order or with a wrong check word
  uint first_error;  // sequence number expected at the first error
  uint pad;
} rp_test_summary;

// Stateful kernel sink: checks that messages arrive in order with the check word they should have
// after `hops` passes through test_map, sums them, and at the end of the stream emits one summary
// and closes its output. Its running totals live in its state memory across relaunches.
RINGPIPE_DECLARE_SIZES(test_verify, sizeof(rp_test_msg), sizeof(rp_test_summary))
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void test_verify(RINGPIPE_KERNEL_PARAMS,
                                                                        __global rp_test_summary* st, uint hops) {
  rp_begin(ctl);
  uint idle_polls = 0;
  uint state = 0;
  while (state == 0) {
    uint tail;
    const uint avail = min(rp_pop_available(in, &tail), 256u);
    for (uint k = 0; k < avail; ++k) {
      __global const rp_test_msg* m = RP_SLOT(in, rp_test_msg, tail + k);
      const uint seq = m->seq;
      const uint got = m->check;
      uint check = rp_test_check(seq);
      for (uint h = 0; h < hops; ++h)
        check = rp_test_mix(check ^ seq);
      if (seq != st->expected || got != check) {
        if (st->errors == 0) st->first_error = st->expected;
        st->errors += 1;
      }
      st->expected = seq + 1;
      st->count += 1;
      st->sum += got;
    }
    bool idle = avail == 0;
    if (avail > 0) {
      rp_pop_commit(in, tail + avail);
      rp_count(ctl, avail, 0);
    } else if (rp_drained(in)) {
      uint head;
      if (rp_push_space(out, &head) > 0) {
        *RP_SLOT(out, rp_test_summary, head) = *st;
        rp_push_commit(out, head + 1);
        rp_count(ctl, 0, 1);
        rp_close(out);
        state = RP_STATE_STOPPED;
        break;
      }
    }
    state = rp_poll(ctl, idle, avail == 0, &idle_polls);
  }
  rp_end(ctl, state);
}

// Raw kernel that never comes back: passes messages on like test_map until sequence number
// hang_at, then spins without a heartbeat and without looking at the stop flag, for `rounds`
// loops (2^40: hours). What a user's kernel stuck in an endless loop looks like to the runtime.
RINGPIPE_DECLARE_SIZES(test_hang, sizeof(rp_test_msg), sizeof(rp_test_msg))
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void test_hang(RINGPIPE_KERNEL_PARAMS, uint hang_at,
                                                                      ulong rounds) {
  // Read before any branch: Mesa's llvmpipe misreads kernel arguments loaded in control flow.
  const ulong spin_rounds = rounds;
  rp_begin(ctl);
  uint idle_polls = 0;
  uint state = 0;
  while (state == 0) {
    rp_test_msg m;
    uint head;
    const bool room = rp_push_space(out, &head) > 0;
    const bool got = room && rp_try_pop_rp_test_msg(in, &m);
    if (got) {
      if (m.seq == hang_at) {
        // Stores to global memory each round (a spare word of the control block, not the
        // heartbeat), so that no compiler may drop the loop: llvmpipe drops one that only loads.
        for (ulong spins = 0;; ++spins)
          rp_store_relaxed(&ctl->pad2[0], (uint)spins);
        state = RP_STATE_STOPPED;
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
