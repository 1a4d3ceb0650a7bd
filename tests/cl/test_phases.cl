// A phased raw kernel for barrier tests and ringpipe-bench: one work-item runs `phases` phases.
// In phase k it records k + 1 in done[me] and checks that no participant has finished fewer than
// k phases or started more than k + 1; once released, that every one finished phase k. Errors
// are counted in done[participants]; phase fail_at fails the kernel with error code 7. With
// `completions`, the barrier's completion function counts phases in done[participants + 1]: once
// released from phase k, every participant must read k + 1 there.
#include <ringpipe/barrier.clh>
RINGPIPE_DECLARE_SIZES(test_phases, 0, 0)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void test_phases(RINGPIPE_KERNEL_PARAMS, __global rp_barrier_seat* seat, __global uint* done, uint me,
                 uint participants, uint phases, uint fail_at, uint completions) {
  rp_begin(ctl);
  for (uint k = 0; k < phases; ++k) {
    if (k == fail_at) { rp_end(ctl, rp_fail(ctl, 7u)); return; }
    rp_store_release(&done[me], k + 1);
    for (uint o = 0; o < participants; ++o) {
      const uint d = rp_load_acquire(&done[o]);
      if (d < k || d > k + 1) RP_ATOMIC_ADD(&done[participants], 1u);
    }
    const uint phase = rp_barrier_arrive(seat);
    const uint why = rp_barrier_wait(seat, ctl, phase);
    if (why != RP_BARRIER_RELEASED) { rp_end(ctl, rp_barrier_leave(ctl, why)); return; }
    for (uint o = 0; o < participants; ++o)
      if (rp_load_acquire(&done[o]) < k + 1) RP_ATOMIC_ADD(&done[participants], 1u);
    if (completions && rp_load_acquire(&done[participants + 1]) != k + 1) RP_ATOMIC_ADD(&done[participants], 1u);
  }
  rp_end(ctl, RP_STATE_STOPPED);
}

// The same for a batched kernel on a device without shared memory: one phase per launch, arriving
// through the host (rp_barrier_relay). It emits its phase number each phase; the barrier's
// completion function checks it and records the phase in done[] for the others.
typedef struct { uint phase, pad[3]; } rp_phase_msg;
RP_DECLARE_KERNEL_STATE(test_phases_relayed, 0, 16, RP_KIND_RAW, 4)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void test_phases_relayed(RINGPIPE_KERNEL_PARAMS, __global uint* phase, uint phases) {
  rp_begin(ctl);
  uint head;
  if (*phase == phases) {
    rp_close(out);
    rp_end(ctl, RP_STATE_STOPPED);
    return;
  }
  if (rp_push_space(out, &head) == 0) { rp_end(ctl, RP_STATE_PARKED); return; } // no room: next launch
  __global rp_phase_msg* m = RP_SLOT(out, rp_phase_msg, head);
  m->phase = *phase;
  rp_push_commit(out, head + 1);
  rp_count(ctl, 0, 1);
  *phase += 1;
  rp_barrier_relay(ctl);
  rp_end(ctl, RP_STATE_PARKED);
}

// One source for every device (rp_barrier_next): each phase emits its number, kept in the
// kernel's state, so that a kernel relaunched for each phase (no seat: the host relays) goes on
// from it, and one waiting on its seat loops. With no room for its message it ends the launch
// (the tests pop every phase's message, so it never does).
RP_DECLARE_KERNEL_STATE(test_phases_any, 0, 16, RP_KIND_RAW, 4)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void test_phases_any(RINGPIPE_KERNEL_PARAMS, __global uint* phase, __global rp_barrier_seat* seat, uint phases) {
  rp_begin(ctl);
  for (;;) {
    if (*phase == phases) {
      rp_close(out);
      rp_end(ctl, RP_STATE_STOPPED);
      return;
    }
    uint head;
    if (rp_push_space(out, &head) == 0) { rp_end(ctl, RP_STATE_PARKED); return; }
    __global rp_phase_msg* m = RP_SLOT(out, rp_phase_msg, head);
    m->phase = *phase;
    rp_push_commit(out, head + 1);
    rp_count(ctl, 0, 1);
    *phase += 1;
    const uint why = rp_barrier_next(seat, ctl);
    if (why != RP_BARRIER_RELEASED) { rp_end(ctl, rp_barrier_leave(ctl, why)); return; }
  }
}

// A phased pipeline stage: phase k takes message k from its input, emits it with k and `tag`,
// then meets the barrier's other members; at the end of its input it closes its output. Its seat
// is its own argument 1 (argument 0, `tag`, comes from kernel_spec::args).
typedef struct { uint seq, phase, tag, pad; } rp_phase_item;
RINGPIPE_DEFINE_RING_OPS(rp_phase_item)
RINGPIPE_DECLARE_SIZES(test_phased_stage, 16, 16)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void test_phased_stage(RINGPIPE_KERNEL_PARAMS, uint tag, __global rp_barrier_seat* seat) {
  rp_begin(ctl);
  uint idle_polls = 0;
  for (uint k = 0;; ++k) {
    rp_phase_item m;
    while (!rp_try_pop_rp_phase_item(in, &m)) {
      if (rp_drained(in)) {
        rp_close(out);
        rp_end(ctl, RP_STATE_STOPPED);
        return;
      }
      const uint leave = rp_poll(ctl, true, true, &idle_polls);
      if (leave != 0) { rp_end(ctl, leave); return; }
    }
    m.phase = k;
    m.tag = tag;
    while (!rp_try_push_rp_phase_item(out, &m)) {
      const uint leave = rp_poll(ctl, true, false, &idle_polls);
      if (leave != 0) { rp_end(ctl, leave); return; }
    }
    rp_count(ctl, 1, 1);
    const uint why = rp_barrier_wait(seat, ctl, rp_barrier_arrive(seat));
    if (why != RP_BARRIER_RELEASED) { rp_end(ctl, rp_barrier_leave(ctl, why)); return; }
  }
}

// A step on the device at every barrier point: the last kernel to arrive checks that every
// participant recorded phase k + 1 in done[], counts the phase in done[participants + 1] and
// releases; once released, every participant must read k + 1 there. Errors in done[participants].
RINGPIPE_DECLARE_SIZES(test_phases_stepped, 0, 0)
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void test_phases_stepped(RINGPIPE_KERNEL_PARAMS, __global rp_barrier_seat* seat, __global uint* done, uint me,
                         uint participants, uint phases) {
  rp_begin(ctl);
  for (uint k = 0; k < phases; ++k) {
    rp_store_release(&done[me], k + 1);
    uint phase;
    if (rp_barrier_arrive_last(seat, &phase)) {
      for (uint o = 0; o < participants; ++o)
        if (rp_load_acquire(&done[o]) != k + 1) RP_ATOMIC_ADD(&done[participants], 1u);
      rp_store_release(&done[participants + 1], k + 1);
      rp_barrier_release(seat, phase);
    }
    const uint why = rp_barrier_wait(seat, ctl, phase);
    if (why != RP_BARRIER_RELEASED) { rp_end(ctl, rp_barrier_leave(ctl, why)); return; }
    if (rp_load_acquire(&done[participants + 1]) != k + 1) RP_ATOMIC_ADD(&done[participants], 1u);
  }
  rp_end(ctl, RP_STATE_STOPPED);
}
