// The mapped-memory litmus (src/core/mapped_litmus.cpp): one work-item stays resident and echoes
// the host's messages through memory the host keeps mapped (or coarse-grained SVM) while the
// kernel runs. OpenCL C 1.2 only: volatile loads and stores and fences, because devices without
// SVM atomics (NVIDIA's) have nothing else. Each wait gives up after `patience` idle polls, so
// the kernel ends even where the host's writes never reach it. What the kernel saw goes to a
// separate device buffer (`results`), read after it returned: what it says holds even where the
// mapped memory is a copy that an unmap would overwrite.
//
// Words (uint), each control word on its own 64-byte line:
//   0 host->device head   16 host->device tail   32 device->host head   48 device->host tail
//   64 stop               96 started (the kernel writes 1 first thing)
//   256.. host->device slots (capacity x 16 words), then device->host slots (capacity x 16 words)

#define RP_LITMUS_WORDS 16u

#ifdef RP_LITMUS_SYSTEM_FENCE
// NVIDIA: membar.sys orders this thread's stores as the host (PCIe) sees them; mem_fence gives
// membar.gl, which orders them for the device only.
#define RP_LITMUS_FENCE() __asm__ volatile("membar.sys;" ::: "memory")
#else
#define RP_LITMUS_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

// Word i (1..15) of message seq; word 0 is seq itself.
uint rp_litmus_word(uint seq, uint i) { return seq * 2654435761u + i * 40503u + 1u; }

// Waits until the word at p differs from `value`; false when stop is set or patience runs out.
bool rp_litmus_wait_change(volatile __global uint* m, volatile __global uint* p, uint value, uint patience,
                           uint* polls) {
  for (uint n = 0; *p == value; ++n, ++*polls)
    if (m[64] != 0u || n >= patience) return false;
  return true;
}

// Gives the host's slots up to seq back and publishes the echoes up to seq.
void rp_litmus_publish(volatile __global uint* m, uint seq) {
  RP_LITMUS_FENCE(); // slots read and written before the heads say so
  m[16] = seq;
  m[32] = seq;
}

// results: received, stale, torn, gave up, done, polls, highest head seen, stop seen
__kernel void rp_mapped_litmus(volatile __global uint* m, uint count, uint capacity, uint patience,
                               uint tear_every, __global uint* results) {
  if (get_global_id(0) != 0) return;
  m[96] = 1u;
  RP_LITMUS_FENCE();
  uint polls = 0, highest_head = 0;
  volatile __global uint* in = m + 256;
  volatile __global uint* out = in + capacity * RP_LITMUS_WORDS;
  uint seq = 0, stale = 0, torn = 0, gave_up = 0;
  while (seq < count) {
    if (!rp_litmus_wait_change(m, m + 0, seq, patience, &polls)) { gave_up = 1; break; }
    RP_LITMUS_FENCE(); // the head before the slots
    const uint head = m[0];
    highest_head = max(highest_head, head);
    for (; seq != head; ++seq) {
      if (seq - m[48] >= capacity) { // the host reads the echoes published so far, then makes room
        rp_litmus_publish(m, seq);
        for (uint room = m[48]; seq - room >= capacity; room = m[48])
          if (!rp_litmus_wait_change(m, m + 48, room, patience, &polls)) { gave_up = 1; break; }
        if (gave_up != 0u) break;
      }
      volatile __global uint* s = in + (seq % capacity) * RP_LITMUS_WORDS;
      const uint previous = seq - capacity; // the slot's last occupant
      uint fresh = s[0] == seq, old = s[0] == previous;
      for (uint i = 1; i < RP_LITMUS_WORDS; ++i) {
        const uint v = s[i];
        fresh += v == rp_litmus_word(seq, i);
        old += v == rp_litmus_word(previous, i);
      }
      if (fresh != RP_LITMUS_WORDS) {
        if (old == RP_LITMUS_WORDS) ++stale;
        else ++torn;
      }
      volatile __global uint* d = out + (seq % capacity) * RP_LITMUS_WORDS;
      d[0] = seq;
      for (uint i = 1; i < RP_LITMUS_WORDS; ++i)
        d[i] = (tear_every != 0u && seq % tear_every == 0u && i == 7u) ? 0u : rp_litmus_word(seq, i);
    }
    rp_litmus_publish(m, seq);
    if (gave_up != 0u) break;
  }
  results[0] = seq;
  results[1] = stale;
  results[2] = torn;
  results[3] = gave_up;
  results[4] = 1u;
  results[5] = polls;
  results[6] = max(highest_head, m[0]);
  results[7] = m[64];
}
