/*
 * Reference replay of an esopt run, written from docs/REPLAY.md alone: plain C99 and libm (sqrt, floor,
 * fabs), no other dependency. It regenerates every member's noise from its seeds (the Gaussian stream or,
 * for a run whose noise is esopt-device-noise, the device definition) and applies the run's
 * updates to θ_0, reaching the trainer's θ_K bit for bit, and checks each θ_k against the run's hashes.
 *
 *   cc -O2 -std=c99 -ffp-contract=off -o replay replay.c -lm
 *
 *   replay run RUN.txt THETA0.bin OUT.bin         apply every update of run.txt (the artifact's text form)
 *                                                to θ_0 (raw little-endian fp32); write θ_K; print hashes
 *   replay noise RUNSEED ITERATION MEMBER OFFSET COUNT
 *                                                print ε[OFFSET, OFFSET+COUNT) of one member: per line the
 *                                                fp32 bits in hex and the ziggurat path (f fast, w wedge or
 *                                                retry, t tail)
 *   replay device-noise RUNSEED ITERATION MEMBER OFFSET COUNT
 *                                                the same under the device noise definition (REPLAY.md
 *                                                §11): per line the fp32 bits in hex
 *   replay math exp|log                          per stdin line a float64's bits in hex, its exp or log out
 *   replay sha256                                the θ hash of stdin's bytes
 *
 * Exit status: 0 done, 1 bad input, 2 θ_0 is not the run's θ_0, 3 a θ_k missed its logged hash.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma STDC FP_CONTRACT OFF

/* Every double and float operation below must round once, to its own type: no x87 excess precision. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "replay.c needs FLT_EVAL_METHOD == 0 (SSE2 or any IEEE machine without excess precision)"
#endif

static void die(int status, const char *fmt, const char *what) {
  fprintf(stderr, "replay: ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n");
  exit(status);
}

/* ---------------------------------------------------------------- float64 bits */

static uint64_t bits_of(double x) {
  uint64_t b;
  memcpy(&b, &x, 8);
  return b;
}

static double double_of(uint64_t b) {
  double x;
  memcpy(&x, &b, 8);
  return x;
}

static uint32_t high_word(double x) { return (uint32_t)(bits_of(x) >> 32); }
static uint32_t low_word(double x) { return (uint32_t)bits_of(x); }
/* The two's-complement int32 with these bits (a plain cast is implementation-defined above INT32_MAX). */
static int32_t as_int32(uint32_t v) { return (v & 0x80000000u) ? -(int32_t)(0x7FFFFFFFu - (v & 0x7FFFFFFFu)) - 1 : (int32_t)v; }
static double with_high_word(double x, uint32_t hi) { return double_of((bits_of(x) & 0xFFFFFFFFu) | ((uint64_t)hi << 32)); }

/* ---------------------------------------------------------------- fdlibm exp and log (REPLAY.md §4) */

/* exp as V8's Math.exp computes it: fdlibm's e_exp.c, operation for operation. */
static double fd_exp(double x) {
  static const double half[2] = {0.5, -0.5};
  static const double ln2hi[2] = {6.93147180369123816490e-01, -6.93147180369123816490e-01};
  static const double ln2lo[2] = {1.90821492927058770002e-10, -1.90821492927058770002e-10};
  const double invln2 = 1.44269504088896338700e+00;
  const double P1 = 1.66666666666666019037e-01, P2 = -2.77777777770155933842e-03, P3 = 6.61375632143793436117e-05;
  const double P4 = -1.65339022054652515390e-06, P5 = 4.13813679705723846039e-08;
  double hi = 0.0, lo = 0.0, t, c, y, twopk;
  int k = 0;
  uint32_t hx = high_word(x);
  int sign = (int)(hx >> 31);
  hx &= 0x7FFFFFFFu;
  if (hx >= 0x40862E42u) { /* |x| ≥ 709.78…: overflow, underflow, inf or NaN */
    if (hx >= 0x7FF00000u) {
      if (((hx & 0xFFFFFu) | low_word(x)) != 0) return x + x;
      return sign == 0 ? x : 0.0;
    }
    if (x > 7.09782712893383973096e+02) return HUGE_VAL;
    if (x < -7.45133219101941108420e+02) return 0.0;
  }
  if (hx > 0x3FD62E42u) { /* |x| > ln2/2: reduce x = k·ln2 + r, r as hi − lo */
    if (hx < 0x3FF0A2B2u) {
      if (x == 1.0) return 2.718281828459045;
      hi = x - ln2hi[sign];
      lo = ln2lo[sign];
      k = 1 - sign - sign;
    } else {
      k = (int)(invln2 * x + half[sign]);
      t = k;
      hi = x - t * ln2hi[0];
      lo = t * ln2lo[0];
    }
    x = hi - lo;
  } else if (hx < 0x3E300000u) { /* |x| < 2^-28 */
    return 1.0 + x;
  }
  t = x * x;
  if (k >= -1021) twopk = double_of((uint64_t)(0x3FF00000u + ((uint32_t)k << 20)) << 32);
  else twopk = double_of((uint64_t)(0x3FF00000u + ((uint32_t)(k + 1000) << 20)) << 32);
  c = x - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  if (k == 0) return 1.0 - ((x * c) / (c - 2.0) - x);
  y = 1.0 - ((lo - (x * c) / (2.0 - c)) - hi);
  if (k >= -1021) {
    if (k == 1024) return y * 2.0 * 8.988465674311579539e307;
    return y * twopk;
  }
  return y * twopk * 9.33263618503218878990e-302;
}

/* log as V8's Math.log computed it through Node 20: fdlibm's e_log.c, operation for operation. */
static double fd_log(double x) {
  const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10, two54 = 1.80143985094819840000e+16;
  const double Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01, Lg3 = 2.857142874366239149e-01;
  const double Lg4 = 2.222219843214978396e-01, Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01;
  const double Lg7 = 1.479819860511658591e-01;
  double f, s, z, w, R, t1, t2, dk, hfsq;
  int32_t hx = as_int32(high_word(x));
  int32_t i, j, k = 0;
  if (hx < 0x00100000) { /* x < 2^-1022: zero, negative or subnormal */
    if (((high_word(x) & 0x7FFFFFFFu) | low_word(x)) == 0) return -HUGE_VAL;
    if (hx < 0) return (x - x) / 0.0;
    k -= 54;
    x *= two54;
    hx = as_int32(high_word(x));
  }
  if (hx >= 0x7FF00000) return x + x;
  k += (hx >> 20) - 1023;
  hx &= 0x000FFFFF;
  i = (hx + 0x95F64) & 0x100000;
  x = with_high_word(x, (uint32_t)(hx | (i ^ 0x3FF00000))); /* x or x/2 into [√2/2, √2) */
  k += i >> 20;
  f = x - 1.0;
  if ((0x000FFFFF & (2 + hx)) < 3) { /* |f| < 2^-20 */
    if (f == 0.0) {
      if (k == 0) return 0.0;
      dk = (double)k;
      return dk * ln2_hi + dk * ln2_lo;
    }
    R = f * f * (0.5 - 0.33333333333333333 * f);
    if (k == 0) return f - R;
    dk = (double)k;
    return dk * ln2_hi - ((R - dk * ln2_lo) - f);
  }
  s = f / (2.0 + f);
  dk = (double)k;
  z = s * s;
  i = hx - 0x6147A;
  w = z * z;
  j = 0x6B851 - hx;
  t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  i |= j;
  R = t2 + t1;
  if (i > 0) {
    hfsq = 0.5 * f * f;
    if (k == 0) return f - (hfsq - s * (hfsq + R));
    return dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f);
  }
  if (k == 0) return f - s * (f - R);
  return dk * ln2_hi - ((s * (f - R) - dk * ln2_lo) - f);
}

/* ---------------------------------------------------------------- Philox4x32-10 (REPLAY.md §1) */

static void philox4x32_10(const uint32_t counter[4], uint32_t k0, uint32_t k1, uint32_t out[4]) {
  uint32_t x0 = counter[0], x1 = counter[1], x2 = counter[2], x3 = counter[3];
  int round;
  for (round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * x0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * x2;
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
    uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    x0 = y0;
    x1 = (uint32_t)p1;
    x2 = y2;
    x3 = (uint32_t)p0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

/* ---------------------------------------------------------------- the stream (REPLAY.md §2, §3) */

#define CHUNK 4096
#define SALT 0x5EED0E50u
#define ZIG_R 3.442619855899

typedef struct {
  uint32_t runSeed, iteration, member;
} NoiseKey;

typedef struct {
  uint32_t s0, s1, s2, s3;
} Xoshiro;

static int32_t KN[128];
static double WN[128], FN[128], XN[128];

/* Marsaglia & Tsang's 128-layer tables, scaled for the signed 25-bit value j = u >> 7 (|j| ≤ 2^24). */
static void ziggurat_tables(void) {
  const double m1 = 16777216.0, vn = 9.91256303526217e-3;
  double dn = ZIG_R, tn = dn, q = vn / fd_exp(-0.5 * dn * dn);
  int i;
  KN[0] = (int32_t)floor((dn / q) * m1);
  KN[1] = 0;
  WN[0] = q / m1;
  WN[127] = dn / m1;
  FN[0] = 1.0;
  FN[127] = fd_exp(-0.5 * dn * dn);
  for (i = 126; i >= 1; i--) {
    dn = sqrt(-2.0 * fd_log(vn / dn + fd_exp(-0.5 * dn * dn)));
    KN[i + 1] = (int32_t)floor((dn / tn) * m1);
    tn = dn;
    FN[i] = fd_exp(-0.5 * dn * dn);
    WN[i] = dn / m1;
  }
  for (i = 0; i < 128; i++) XN[i] = (double)KN[i] * WN[i];
}

static void seed_chunk(NoiseKey key, uint64_t chunk, Xoshiro *g) {
  uint32_t counter[4], out[4];
  counter[0] = (uint32_t)chunk;
  counter[1] = (uint32_t)(chunk >> 32);
  counter[2] = key.member;
  counter[3] = key.iteration;
  philox4x32_10(counter, key.runSeed, SALT, out);
  g->s0 = out[0];
  g->s1 = out[1];
  g->s2 = out[2];
  g->s3 = out[3];
  if ((g->s0 | g->s1 | g->s2 | g->s3) == 0) g->s0 = 1; /* xoshiro's one forbidden state */
}

static uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

/* xoshiro128**: one 32-bit output. */
static uint32_t next_u32(Xoshiro *g) {
  uint32_t result = rotl(g->s1 * 5u, 7) * 9u;
  uint32_t t = g->s1 << 9;
  g->s2 ^= g->s0;
  g->s3 ^= g->s1;
  g->s1 ^= g->s2;
  g->s0 ^= g->s3;
  g->s2 ^= t;
  g->s3 = rotl(g->s3, 11);
  return result;
}

/* The output read as int32 and shifted right arithmetically by 7: the signed value in its top 25 bits. */
static int32_t value_of(uint32_t u) { return (int32_t)(u >> 7) - ((u & 0x80000000u) ? (int32_t)0x2000000 : 0); }

/* (u + 1/2)·2^-32 in (0, 1), exact in float64. */
static double uniform(Xoshiro *g) { return (double)next_u32(g) * 0x1p-32 + 0x1p-33; }

enum { PATH_FAST = 'f', PATH_WEDGE = 'w', PATH_TAIL = 't' };

/* One N(0,1) draw; *path says how it was accepted. */
static double normal(Xoshiro *g, int *path) {
  uint32_t u = next_u32(g);
  int i = (int)(u & 127);
  int32_t j = value_of(u);
  double x = (double)j * WN[i];
  if (fabs(x) < XN[i]) {
    *path = PATH_FAST;
    return x;
  }
  *path = PATH_WEDGE;
  for (;;) {
    x = (double)j * WN[i];
    if (i == 0) {
      double xt, y;
      do {
        xt = -fd_log(uniform(g)) / ZIG_R;
        y = -fd_log(uniform(g));
      } while (y + y < xt * xt);
      *path = PATH_TAIL;
      return j > 0 ? ZIG_R + xt : -ZIG_R - xt;
    }
    if (FN[i] + uniform(g) * (FN[i - 1] - FN[i]) < fd_exp(-0.5 * x * x)) return x;
    u = next_u32(g);
    i = (int)(u & 127);
    j = value_of(u);
    x = (double)j * WN[i];
    if (fabs(x) < XN[i]) return x;
  }
}

/* eps[k] = ε_key[pos + k] for k < n, as float32; paths[k] its ziggurat path when paths is not NULL. */
static void noise_range(NoiseKey key, uint64_t pos, uint64_t n, float *eps, char *paths) {
  uint64_t done = 0;
  while (done < n) {
    uint64_t at = pos + done, chunk = at / CHUNK, skip = at % CHUNK, take = CHUNK - skip, k;
    Xoshiro g;
    int path;
    if (take > n - done) take = n - done;
    seed_chunk(key, chunk, &g);
    for (k = 0; k < skip; k++) normal(&g, &path);
    for (k = 0; k < take; k++) {
      eps[done + k] = (float)normal(&g, &path);
      if (paths) paths[done + k] = (char)path;
    }
    done += take;
  }
}

/* ---------------------------------------------------------------- the device noise definition (REPLAY.md §11) */

#define DEVICE_SALT 0xD1CE0001u
#define DEVICE_GOLDEN 0x9E3779B1u
#define DEVICE_BLOCK 4294967296ull
#define DEVICE_CENTRE 131070
static const uint32_t DEVICE_ROUNDS[6] = {0x85EBCA6Bu, 0xC2B2AE35u, 0x27D4EB2Fu, 0x165667B1u, 0xD3A2646Du, 0xFD7046C5u};

/* Which definition the run's noise is (run.txt's `noise` line); `replay noise` is the Gaussian stream. */
static int device_noise;

/* Block `block`'s keys: Philox4x32-10 of counter (member, iteration, block, salt), key (runSeed, 0), words 0 and 1. */
static void device_keys(NoiseKey key, uint32_t block, uint32_t *k0, uint32_t *k1) {
  uint32_t counter[4], out[4];
  counter[0] = key.member;
  counter[1] = key.iteration;
  counter[2] = block;
  counter[3] = DEVICE_SALT;
  philox4x32_10(counter, key.runSeed, 0, out);
  *k0 = out[0];
  *k1 = out[1];
}

/* u32 product mod 2^32, through uint64 so no promotion to a signed int can overflow. */
static uint32_t mul32(uint32_t a, uint32_t b) { return (uint32_t)((uint64_t)a * b); }

/* One round: x·(2x + c), then the 16-bit rotation. */
static uint32_t device_round(uint32_t x, uint32_t c) {
  uint32_t y = mul32(x + x + c, x);
  return (y >> 16) | (y << 16);
}

/* ε of element `index` (within its block) of a block with keys (k0, k1). */
static float device_noise_at(uint32_t index, uint32_t k0, uint32_t k1) {
  const float scale = 0x1.bb67aep-16f; /* fl32(√3 / 65536) */
  uint32_t x = mul32(index, DEVICE_GOLDEN) + k0, h0, s;
  int r;
  x = device_round(x, DEVICE_ROUNDS[0]);
  x += k1;
  for (r = 1; r < 4; r++) x = device_round(x, DEVICE_ROUNDS[r]);
  h0 = x;
  x = h0 + k0;
  for (r = 4; r < 6; r++) x = device_round(x, DEVICE_ROUNDS[r]);
  s = (h0 >> 16) + (h0 & 0xFFFFu) + (x >> 16) + (x & 0xFFFFu);
  return (float)((int32_t)s - DEVICE_CENTRE) * scale; /* the integer is exact in float; one rounding */
}

/* eps[k] = ε_key[pos + k] for k < n under the device definition. */
static void device_noise_range(NoiseKey key, uint64_t pos, uint64_t n, float *eps) {
  uint64_t k = 0;
  while (k < n) {
    uint64_t at = pos + k, block = at / DEVICE_BLOCK, stop = (block + 1) * DEVICE_BLOCK;
    uint32_t k0, k1;
    if (block > 0xFFFFFFFFu) die(1, "device noise offsets end at 2^64%s", "");
    device_keys(key, (uint32_t)block, &k0, &k1);
    for (; k < n && pos + k < stop; k++) eps[k] = device_noise_at((uint32_t)(pos + k - block * DEVICE_BLOCK), k0, k1);
  }
}

/* The run's noise: the Gaussian stream or the device definition. */
static void run_noise(NoiseKey key, uint64_t pos, uint64_t n, float *eps) {
  if (device_noise) device_noise_range(key, pos, n, eps);
  else noise_range(key, pos, n, eps, NULL);
}

/* ---------------------------------------------------------------- SHA-256 and the θ hash (REPLAY.md §7) */

typedef struct {
  uint32_t h[8];
  unsigned char block[64];
  size_t used;
  uint64_t bytes;
} Sha256;

static const uint32_t SHA_K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};

static uint32_t rotr(uint32_t x, int k) { return (x >> k) | (x << (32 - k)); }

static void sha_init(Sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  memcpy(s->h, h0, sizeof h0);
  s->used = 0;
  s->bytes = 0;
}

static void sha_block(Sha256 *s, const unsigned char *p) {
  uint32_t w[64], a, b, c, d, e, f, g, h;
  int t;
  for (t = 0; t < 16; t++) w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
  for (t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (t = 0; t < 64; t++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[t] + w[t];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha_update(Sha256 *s, const unsigned char *p, size_t n) {
  s->bytes += n;
  while (n > 0) {
    size_t take = 64 - s->used < n ? 64 - s->used : n;
    memcpy(s->block + s->used, p, take);
    s->used += take, p += take, n -= take;
    if (s->used == 64) sha_block(s, s->block), s->used = 0;
  }
}

/* The θ hash: the first 32 hex digits of SHA-256 over the bytes hashed. */
static void sha_hex32(Sha256 *s, char out[33]) {
  unsigned char pad[72] = {0x80};
  uint64_t bits = s->bytes * 8;
  size_t n = (s->used < 56 ? 56 : 120) - s->used, k;
  for (k = 0; k < 8; k++) pad[n + k] = (unsigned char)(bits >> (56 - 8 * k));
  sha_update(s, pad, n + 8);
  for (k = 0; k < 16; k++) sprintf(out + 2 * k, "%02x", (unsigned)((s->h[k / 4] >> (24 - 8 * (k % 4))) & 0xFF));
  out[32] = 0;
}

/* θ's fp32 values as little-endian bytes, whatever this machine's byte order. */
static void theta_hash(const float *theta, uint64_t n, char out[33]) {
  Sha256 s;
  unsigned char buf[4 * 1024];
  uint64_t i = 0;
  sha_init(&s);
  while (i < n) {
    size_t k, m = n - i < 1024 ? (size_t)(n - i) : 1024;
    for (k = 0; k < m; k++) {
      uint32_t b;
      memcpy(&b, &theta[i + k], 4);
      buf[4 * k] = (unsigned char)b, buf[4 * k + 1] = (unsigned char)(b >> 8), buf[4 * k + 2] = (unsigned char)(b >> 16), buf[4 * k + 3] = (unsigned char)(b >> 24);
    }
    sha_update(&s, buf, 4 * m);
    i += m;
  }
  sha_hex32(&s, out);
}

/* ---------------------------------------------------------------- the artifact's text form (REPLAY.md §8) */

typedef struct {
  uint64_t offset, count;
  int updated; /* the run's targets select it: the updates (decay too) touch it */
} Tensor;

typedef struct {
  uint64_t tensor, m, n, offset;
  int transposed;
} Target;

typedef struct {
  uint32_t noiseIndex;
  double coef;
} Coef;

typedef struct {
  uint32_t iteration, runSeed;
  double decay;
  uint64_t ncoef;
  Coef *coefs;
  char hashAfter[33];
} Update;

typedef struct {
  int lowrank;
  uint64_t rank, params, ntensors, ntargets, nupdates;
  char theta0[33];
  Tensor *tensors;
  Target *targets;
  Update *updates;
} Artifact;

static FILE *text_in;
static char token[4096];

static const char *next_token(void) {
  if (fscanf(text_in, "%4095s", token) != 1) die(1, "run.txt ends early%s", "");
  return token;
}

static void expect_word(const char *word) {
  if (strcmp(next_token(), word) != 0) die(1, "run.txt: expected \"%s\"", word);
}

static uint64_t next_uint(const char *what) {
  char *end;
  unsigned long long v = strtoull(next_token(), &end, 10);
  if (*end != 0 || token[0] == '-') die(1, "run.txt: %s is not a non-negative integer", what);
  return (uint64_t)v;
}

static uint32_t next_u32_field(const char *what) {
  uint64_t v = next_uint(what);
  if (v > 0xFFFFFFFFu) die(1, "run.txt: %s does not fit 32 bits", what);
  return (uint32_t)v;
}

/* A θ hash field: 32 lowercase hex digits (REPLAY.md §7). */
static void next_hash(char out[33], const char *what) {
  const char *t = next_token();
  if (strlen(t) != 32 || strspn(t, "0123456789abcdef") != 32) die(1, "run.txt: %s must be 32 lowercase hex digits", what);
  memcpy(out, t, 33);
}

static double next_bits(const char *what) {
  char *end;
  const char *t = next_token();
  if (strlen(t) != 16) die(1, "run.txt: %s must be 16 hex digits of a float64", what);
  return double_of((uint64_t)strtoull(t, &end, 16));
}

static void *alloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) die(1, "out of memory%s", "");
  return p;
}

static void read_artifact(const char *path, Artifact *a) {
  uint64_t i, c, sum = 0, factors = 0;
  text_in = fopen(path, "r");
  if (!text_in) die(1, "cannot open %s", path);
  expect_word("esopt-run/2");
  expect_word("noise");
  next_token();
  if (strcmp(token, "esopt-noise") == 0) device_noise = 0;
  else if (strcmp(token, "esopt-device-noise") == 0) device_noise = 1;
  else die(1, "run.txt: unknown noise definition %s (this replay implements esopt-noise and esopt-device-noise)", token);
  if (next_uint("noise version") != 1) die(1, "run.txt: this replay implements version 1 of %s only", device_noise ? "esopt-device-noise" : "esopt-noise");
  expect_word("mode");
  next_token();
  if (strcmp(token, "full") == 0) a->lowrank = 0;
  else if (strcmp(token, "lowrank") == 0) a->lowrank = 1;
  else die(1, "run.txt: unknown mode %s", token);
  a->rank = next_uint("rank");
  expect_word("theta0");
  next_hash(a->theta0, "theta0");
  expect_word("tensors");
  a->ntensors = next_uint("tensor count");
  a->params = next_uint("params");
  a->tensors = alloc(a->ntensors, sizeof(Tensor));
  for (i = 0; i < a->ntensors; i++) {
    expect_word("tensor");
    a->tensors[i].offset = next_uint("tensor offset");
    a->tensors[i].count = next_uint("tensor count");
    a->tensors[i].updated = (int)next_uint("tensor updated");
    if (a->tensors[i].updated > 1) die(1, "run.txt: a tensor's updated flag is 0 or 1%s", "");
    next_token(); /* the name */
    if (a->tensors[i].offset != sum) die(1, "run.txt: tensors must lie back to back from stream offset 0%s", "");
    sum += a->tensors[i].count;
  }
  if (sum != a->params) die(1, "run.txt: the tensors do not add up to params%s", "");
  expect_word("targets");
  a->ntargets = next_uint("target count");
  a->targets = alloc(a->ntargets, sizeof(Target));
  for (i = 0; i < a->ntargets; i++) {
    Target *t = &a->targets[i];
    expect_word("target");
    t->tensor = next_uint("target tensor");
    t->m = next_uint("target m");
    t->n = next_uint("target n");
    t->transposed = (int)next_uint("target transposed");
    t->offset = next_uint("target offset");
    if (t->tensor >= a->ntensors || a->tensors[t->tensor].count != t->m * t->n) die(1, "run.txt: a target does not fit its tensor%s", "");
    if (t->offset != factors) die(1, "run.txt: target factors must follow each other in the stream%s", "");
    factors += (t->m + t->n) * a->rank;
  }
  if (a->lowrank != (a->ntargets > 0)) die(1, "run.txt: low-rank mode needs targets, full mode none%s", "");
  expect_word("updates");
  a->nupdates = next_uint("update count");
  a->updates = alloc(a->nupdates, sizeof(Update));
  for (i = 0; i < a->nupdates; i++) {
    Update *u = &a->updates[i];
    expect_word("update");
    u->iteration = next_u32_field("iteration");
    u->runSeed = next_u32_field("runSeed");
    u->decay = next_bits("decay");
    u->ncoef = next_uint("coefficient count");
    next_hash(u->hashAfter, "thetaHashAfter");
    if (u->iteration != i) die(1, "run.txt: updates must run from iteration 0 without gaps%s", "");
    u->coefs = alloc(u->ncoef, sizeof(Coef));
    for (c = 0; c < u->ncoef; c++) {
      expect_word("coef");
      u->coefs[c].noiseIndex = next_u32_field("noiseIndex");
      u->coefs[c].coef = next_bits("coef");
    }
  }
  fclose(text_in);
}

/* ---------------------------------------------------------------- the updates (REPLAY.md §5, §6) */

/*
 * Full mode, over each updated tensor: θ ← fl32(θ·(1 − decay) + Σ_j coef_j·ε_j), the sum in float64 in
 * ascending noise index, ε at the tensor's own stream offsets.
 */
static void full_update(float *theta, const Artifact *a, const Update *u) {
  static float eps[CHUNK];
  static double acc[CHUNK];
  const double keep = 1.0 - u->decay;
  uint64_t t, pos, c, i;
  for (t = 0; t < a->ntensors; t++) {
    const Tensor *tensor = &a->tensors[t];
    const uint64_t end = tensor->offset + tensor->count;
    if (!tensor->updated) continue;
    for (pos = tensor->offset; pos < end; pos += CHUNK) {
      uint64_t n = end - pos < CHUNK ? end - pos : CHUNK;
      for (i = 0; i < n; i++) acc[i] = 0.0;
      for (c = 0; c < u->ncoef; c++) {
        NoiseKey key;
        key.runSeed = u->runSeed, key.iteration = u->iteration, key.member = u->coefs[c].noiseIndex;
        run_noise(key, pos, n, eps);
        for (i = 0; i < n; i++) acc[i] += u->coefs[c].coef * (double)eps[i];
      }
      for (i = 0; i < n; i++) theta[pos + i] = (float)((double)theta[pos + i] * keep + acc[i]);
    }
  }
}

/*
 * Low-rank mode, per updated target: W ← fl32(W·(1 − decay)), then W += Σ_j (coef_j/√r)·A_j·B_jᵀ formed row by
 * row in float64 (terms in order, then k, then the row's columns) and added to W with one rounding.
 */
static void lowrank_update(float *theta, const Artifact *a, const Update *u) {
  const uint64_t r = a->rank;
  const double keep = 1.0 - u->decay;
  uint64_t t, c, i, k, j;
  for (t = 0; t < a->ntargets; t++) {
    const Target *tg = &a->targets[t];
    float *W = theta + a->tensors[tg->tensor].offset;
    if (!a->tensors[tg->tensor].updated) continue; /* not among the run's targets: its factors' place stays */
    uint64_t m = tg->m, n = tg->n, rows = tg->transposed ? n : m, cols = tg->transposed ? m : n;
    float **A = alloc(u->ncoef, sizeof(float *)), **B = alloc(u->ncoef, sizeof(float *));
    double *scale = alloc(u->ncoef, sizeof(double)), *rowSum = alloc(cols, sizeof(double));
    if (u->decay != 0.0)
      for (i = 0; i < m * n; i++) W[i] = (float)((double)W[i] * keep);
    for (c = 0; c < u->ncoef; c++) {
      NoiseKey key;
      key.runSeed = u->runSeed, key.iteration = u->iteration, key.member = u->coefs[c].noiseIndex;
      A[c] = alloc(m * r, sizeof(float));
      B[c] = alloc(n * r, sizeof(float));
      run_noise(key, tg->offset, m * r, A[c]);
      run_noise(key, tg->offset + m * r, n * r, B[c]);
      scale[c] = u->coefs[c].coef / sqrt((double)r);
    }
    /* Not transposed: row i of W (m×n) is Σ A[i,k]·B[:,k]. Transposed (W stored n×m): row v is Σ B[v,k]·A[:,k]. */
    for (i = 0; i < rows; i++) {
      for (j = 0; j < cols; j++) rowSum[j] = 0.0;
      for (c = 0; c < u->ncoef; c++) {
        const float *rowF = tg->transposed ? B[c] : A[c], *colF = tg->transposed ? A[c] : B[c];
        for (k = 0; k < r; k++) {
          double f = (double)rowF[i * r + k] * scale[c];
          if (f == 0.0) continue;
          for (j = 0; j < cols; j++) rowSum[j] += f * (double)colF[j * r + k];
        }
      }
      for (j = 0; j < cols; j++) W[i * cols + j] = (float)((double)W[i * cols + j] + rowSum[j]);
    }
    for (c = 0; c < u->ncoef; c++) free(A[c]), free(B[c]);
    free(A), free(B), free(scale), free(rowSum);
  }
}

/* ---------------------------------------------------------------- commands */

static float *read_theta(const char *path, uint64_t params) {
  FILE *f = fopen(path, "rb");
  unsigned char b[4];
  float *theta = alloc(params, sizeof(float));
  uint64_t i;
  if (!f) die(1, "cannot open %s", path);
  for (i = 0; i < params; i++) {
    uint32_t v;
    if (fread(b, 1, 4, f) != 4) die(1, "%s is shorter than the layout's params × 4 bytes", path);
    v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    memcpy(&theta[i], &v, 4);
  }
  if (fread(b, 1, 1, f) != 0) die(1, "%s is longer than the layout's params × 4 bytes", path);
  fclose(f);
  return theta;
}

static void write_theta(const char *path, const float *theta, uint64_t params) {
  FILE *f = fopen(path, "wb");
  uint64_t i;
  if (!f) die(1, "cannot write %s", path);
  for (i = 0; i < params; i++) {
    uint32_t v;
    unsigned char b[4];
    memcpy(&v, &theta[i], 4);
    b[0] = (unsigned char)v, b[1] = (unsigned char)(v >> 8), b[2] = (unsigned char)(v >> 16), b[3] = (unsigned char)(v >> 24);
    if (fwrite(b, 1, 4, f) != 4) die(1, "cannot write %s", path);
  }
  if (fclose(f) != 0) die(1, "cannot write %s", path);
}

static int cmd_run(const char *text, const char *theta0, const char *out) {
  Artifact a;
  float *theta;
  char hash[33];
  uint64_t k;
  int missed = 0;
  memset(&a, 0, sizeof a);
  read_artifact(text, &a);
  theta = read_theta(theta0, a.params);
  theta_hash(theta, a.params, hash);
  if (strcmp(hash, a.theta0) != 0) {
    fprintf(stderr, "replay: θ_0 hashes to %s, the run's θ_0 is %s\n", hash, a.theta0);
    return 2;
  }
  printf("theta0 %s\n", hash);
  for (k = 0; k < a.nupdates; k++) {
    const Update *u = &a.updates[k];
    if (a.lowrank) lowrank_update(theta, &a, u);
    else full_update(theta, &a, u);
    theta_hash(theta, a.params, hash);
    printf("iteration %lu %s %s\n", (unsigned long)u->iteration, hash, strcmp(hash, u->hashAfter) == 0 ? "ok" : "MISMATCH");
    if (strcmp(hash, u->hashAfter) != 0) missed = 1;
  }
  write_theta(out, theta, a.params);
  printf("thetaK %s\n", hash);
  return missed ? 3 : 0;
}

static uint64_t arg_u64(const char *s, const char *what) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end != 0 || s[0] == '-' || s[0] == 0 || v > 9007199254740992ull) die(1, "%s must be an integer in [0, 2^53]", what);
  return (uint64_t)v;
}

static uint32_t arg_u32(const char *s, const char *what) {
  uint64_t v = arg_u64(s, what);
  if (v > 0xFFFFFFFFu) die(1, "%s must be a uint32", what);
  return (uint32_t)v;
}

static int cmd_noise(char **argv) {
  NoiseKey key;
  uint64_t offset, count, i;
  float *eps;
  char *paths;
  key.runSeed = arg_u32(argv[0], "RUNSEED");
  key.iteration = arg_u32(argv[1], "ITERATION");
  key.member = arg_u32(argv[2], "MEMBER");
  offset = arg_u64(argv[3], "OFFSET");
  count = arg_u64(argv[4], "COUNT");
  eps = alloc(count, sizeof(float));
  paths = alloc(count, 1);
  noise_range(key, offset, count, eps, paths);
  for (i = 0; i < count; i++) {
    uint32_t b;
    memcpy(&b, &eps[i], 4);
    printf("%08lx %c\n", (unsigned long)b, paths[i]);
  }
  return 0;
}

static int cmd_device_noise(char **argv) {
  NoiseKey key;
  uint64_t offset, count, i;
  float *eps;
  key.runSeed = arg_u32(argv[0], "RUNSEED");
  key.iteration = arg_u32(argv[1], "ITERATION");
  key.member = arg_u32(argv[2], "MEMBER");
  offset = arg_u64(argv[3], "OFFSET");
  count = arg_u64(argv[4], "COUNT");
  eps = alloc(count, sizeof(float));
  device_noise_range(key, offset, count, eps);
  for (i = 0; i < count; i++) {
    uint32_t b;
    memcpy(&b, &eps[i], 4);
    printf("%08lx\n", (unsigned long)b);
  }
  return 0;
}

static int cmd_math(const char *fn) {
  char line[64];
  int isExp = strcmp(fn, "exp") == 0;
  if (!isExp && strcmp(fn, "log") != 0) die(1, "math takes exp or log, not %s", fn);
  while (fgets(line, sizeof line, stdin)) {
    double x = double_of((uint64_t)strtoull(line, NULL, 16));
    printf("%016llx\n", (unsigned long long)bits_of(isExp ? fd_exp(x) : fd_log(x)));
  }
  return 0;
}

static int cmd_sha256(void) {
  Sha256 s;
  unsigned char buf[65536];
  size_t n;
  char hex[33];
  sha_init(&s);
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) sha_update(&s, buf, n);
  sha_hex32(&s, hex);
  printf("%s\n", hex);
  return 0;
}

int main(int argc, char **argv) {
  ziggurat_tables();
  if (argc == 5 && strcmp(argv[1], "run") == 0) return cmd_run(argv[2], argv[3], argv[4]);
  if (argc == 7 && strcmp(argv[1], "noise") == 0) return cmd_noise(argv + 2);
  if (argc == 7 && strcmp(argv[1], "device-noise") == 0) return cmd_device_noise(argv + 2);
  if (argc == 3 && strcmp(argv[1], "math") == 0) return cmd_math(argv[2]);
  if (argc == 2 && strcmp(argv[1], "sha256") == 0) return cmd_sha256();
  fprintf(stderr, "usage: replay run RUN.txt THETA0.bin OUT.bin | noise RUNSEED ITERATION MEMBER OFFSET COUNT | device-noise RUNSEED ITERATION MEMBER OFFSET COUNT | math exp|log | sha256\n");
  return 1;
}
