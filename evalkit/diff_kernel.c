/* One-pass chunk statistics for `evalkit diff`, figure for figure the same as the numpy
 * reference `metrics.weights.chunk_stats` / `overlap_chunk` (and the numba kernels of
 * `evalkit.diff_kernels`). Built at first use by `evalkit.diff_ckernel` with the system C
 * compiler (`cc -O3 -march=native -ffp-contract=off`, no fast-math) and called through ctypes.
 *
 * Order of the float64 sums (what makes every path give identical bits): entry i of a chunk is
 * added to lane i % 8, each lane sequentially in entry order, lanes combined as
 * ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) + 0.0 (`metrics.weights.lane_sum`). Entries that add
 * nothing (unchanged, non-finite) add +0.0 here, which leaves a lane's value unchanged. The
 * 8 lanes are independent, so the compiler keeps them in one or two vector registers without
 * reassociating anything. Squares and products of float32 values are exact in float64.
 *
 * The |delta| histogram (top 16 bits of float32 |delta|) adds each nonzero delta's square into
 * its bin in entry order; entries with delta 0 go to bin 0 (count only) at the end.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define LANES 8
#define BLOCK 2048 /* entries per pass: the block's |delta| scratch stays in L1 */

/* 8 lanes as GCC/Clang vector types: the compiler maps them to AVX-512, AVX2 or SSE */
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));
typedef int32_t v8i32 __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef int64_t v8i64 __attribute__((vector_size(64)));

#define EXP32 0x7f800000u
#define ABS32 0x7fffffffu

static inline double combine(v8d l) {
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + 0.0;
}

/* acc += x * y lane by lane, x and y float32 (products exact in float64) */
static inline v8d to_f64(v8f x) {
#ifdef __AVX512F__ /* one instruction (GCC splits __builtin_convertvector into four) */
    __m256 v;
    memcpy(&v, &x, sizeof v);
    __m512d w = _mm512_cvtps_pd(v);
    v8d r;
    memcpy(&r, &w, sizeof r);
    return r;
#else
    return __builtin_convertvector(x, v8d);
#endif
}

static inline void add_products(v8d *acc, v8f x, v8f y) {
    *acc += to_f64(x) * to_f64(y);
}

static inline int64_t hsum(v8i64 c) {
    return c[0] + c[1] + c[2] + c[3] + c[4] + c[5] + c[6] + c[7];
}

/* float32 bit patterns of 8 entries from position i: bf16 (top half of a float32), fp16 (by
 * the float32 `table`), fp32 (as stored) */
static inline v8u32 bits_bf16(const uint16_t *p, int64_t i, const float *table) {
    (void)table;
#ifdef __AVX2__ /* one widening load (GCC splits __builtin_convertvector into four steps) */
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + i)));
    v8u32 r;
    memcpy(&r, &w, sizeof r);
    return r << 16;
#else
    v8u16 x;
    memcpy(&x, p + i, sizeof x);
    return __builtin_convertvector(x, v8u32) << 16;
#endif
}

static inline v8u32 bits_f16(const uint16_t *p, int64_t i, const float *table) {
    v8f v = {table[p[i]], table[p[i + 1]], table[p[i + 2]], table[p[i + 3]],
             table[p[i + 4]], table[p[i + 5]], table[p[i + 6]], table[p[i + 7]]};
    return (v8u32)v;
}

static inline v8u32 bits_f32(const uint32_t *p, int64_t i, const float *table) {
    v8u32 x;
    (void)table;
    memcpy(&x, p + i, sizeof x);
    return x;
}

static inline uint32_t one_bf16(const uint16_t *p, int64_t i, const float *table) {
    (void)table;
    return (uint32_t)p[i] << 16;
}

static inline uint32_t one_f16(const uint16_t *p, int64_t i, const float *table) {
    uint32_t u;
    memcpy(&u, table + p[i], sizeof u);
    return u;
}

static inline uint32_t one_f32(const uint32_t *p, int64_t i, const float *table) {
    (void)table;
    return p[i];
}

static inline v8u32 max_u32(v8u32 a, v8u32 b) {
#ifdef __AVX2__
    __m256i x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    x = _mm256_max_epu32(x, y);
    memcpy(&a, &x, sizeof a);
    return a;
#else
    v8u32 gt = (v8u32)(a > b);
    return (a & gt) | (b & ~gt);
#endif
}

static inline v8i32 is_fin(v8u32 u) { return (u & EXP32) != EXP32; }
static inline v8i64 widen(v8i32 mask) { return __builtin_convertvector(mask, v8i64); }

/* Keep the entries of `ad` with ad > 0 at out[0..), in lane order; return how many.
 * Writes up to 8 floats (compress in a register, then one store: a compressing store to
 * memory is microcoded on Intel cores). */
static inline int32_t compress_moved(v8f ad, float *out) {
#if defined(__AVX512F__) && defined(__AVX512VL__)
    __m256 v;
    memcpy(&v, &ad, sizeof v);
    __mmask8 keep = _mm256_cmp_ps_mask(v, _mm256_setzero_ps(), _CMP_GT_OQ);
    _mm256_storeu_ps(out, _mm256_maskz_compress_ps(keep, v)); /* out has 8 slots of room */
    return __builtin_popcount(keep);
#else
    int32_t m = 0;
    for (int j = 0; j < LANES; j++) {
        out[m] = ad[j];
        m += ad[j] > 0.0f;
    }
    return m;
#endif
}

/* out_i: n, changed, changed_atol, changed_rel, nonfinite_pairs, nan_base, inf_base,
 *        nan_other, inf_other, lowest and past-highest histogram bin >= 1 in use;  out_f: sum d^2, sum w^2, max |d|.
 * Per entry: ok = the delta finite (it is not when either side is NaN or Inf, or when it
 * overflows); d = other - base where ok and the raw bits
 * differ, else 0; the 8-lane body is branch-free. Counts go into int32 lanes per block (at
 * most BLOCK / 8 each); NaN/Inf are counted one by one only in blocks that hold any. The
 * nonzero |d| of a block, compressed in entry order, then go into the histogram. A chunk's
 * length need not be a multiple of 8: the tail is padded with a copy of the base on both sides
 * (no change; its squares, NaN and Inf masked out). */
#define STATS(NAME, T, BITS, ONE)                                                                       \
void NAME(const T *a, const T *b, int64_t n, const float *table, float atol, float rtol,     \
          int64_t *hist_count, double *hist_sq, int64_t *out_i, double *out_f) {              \
    v8d sq_u = {0}, sq_w = {0};                                                               \
    int64_t changed = 0, n_atol = 0, n_rel = 0, bad = 0, odd[4] = {0};                        \
    v8u32 top = {0};                                                                          \
    float moved_ad[BLOCK + LANES];                                                                    \
    T pad_a[LANES], pad_b[LANES];                                                             \
    int64_t moved = 0;                                                                        \
    uint32_t lo = 1u << 15, hi = 0; /* bins >= 1 in use: [lo, hi) */                          \
    for (int64_t start = 0; start < n; start += BLOCK) {                                      \
        int64_t len = n - start < BLOCK ? n - start : BLOCK;                                  \
        v8i32 c_changed = {0}, c_atol = {0}, c_rel = {0}, c_bad = {0};                        \
        int32_t m = 0;                                                                        \
        for (int64_t i = 0; i < len; i += LANES) {                                            \
            const T *pa = a + start, *pb = b + start;                                         \
            int64_t at = i;                                                                   \
            v8i32 live = {-1, -1, -1, -1, -1, -1, -1, -1};                                    \
            if (len - i < LANES) { /* the chunk's tail */                                     \
                for (int j = 0; j < LANES; j++) {                                             \
                    int in = i + j < len;                                                     \
                    pad_a[j] = in ? pa[i + j] : pa[i];                                        \
                    pad_b[j] = in ? pb[i + j] : pa[i];                                        \
                    live[j] = in ? -1 : 0;                                                    \
                }                                                                             \
                pa = pad_a, pb = pad_b, at = 0;                                               \
            }                                                                                 \
            v8u32 ua = BITS(pa, at, table), ub = BITS(pb, at, table);                         \
            v8f va = (v8f)ua, vb = (v8f)ub;                                                   \
            v8i32 ch = (ua != ub);                                                            \
            v8i32 fa = is_fin(ua);                                                            \
            v8f diff = vb - va;                                                               \
            v8i32 ok = is_fin((v8u32)diff); /* NaN or Inf on a side makes it so */           \
            v8u32 du = (v8u32)diff & (v8u32)(ok & ch);                                        \
            v8u32 adu = du & ABS32;                                                           \
            v8f ad = (v8f)adu;                                                                \
            m += compress_moved(ad, moved_ad + m);                                            \
            v8f wa = (v8f)(ua & (v8u32)(fa & live));                                          \
            add_products(&sq_w, wa, wa);                                                      \
            add_products(&sq_u, (v8f)du, (v8f)du);                                            \
            c_changed += ch;                                                                  \
            c_atol += ad > atol;                                                              \
            c_rel += ad > rtol * (v8f)(ua & ABS32);                                           \
            c_bad += ~ok & live;                                                              \
            top = max_u32(top, adu); /* |d| >= 0: float order is unsigned-int order */     \
        }                                                                                     \
        int32_t block_bad = 0;                                                                \
        for (int j = 0; j < LANES; j++) {                                                     \
            changed -= c_changed[j]; n_atol -= c_atol[j]; n_rel -= c_rel[j];                  \
            block_bad -= c_bad[j];                                                            \
        }                                                                                     \
        bad += block_bad;                                                                     \
        if (block_bad) /* rare: count NaN and Inf on each side one by one */                  \
            for (int64_t i = 0; i < len; i++) {                                               \
                uint32_t sides[2] = {ONE(a, start + i, table)        ,                        \
                                     ONE(b, start + i, table)        };                       \
                for (int s = 0; s < 2; s++) {                                                 \
                    uint32_t u = sides[s] & ABS32;                                            \
                    odd[2 * s] += u > EXP32;                                                  \
                    odd[2 * s + 1] += u == EXP32;                                             \
                }                                                                             \
            }                                                                                 \
        for (int32_t t = 0; t < m; t++) {                                                     \
            float ad = moved_ad[t];                                                           \
            uint32_t k;                                                                       \
            memcpy(&k, &ad, sizeof k);                                                        \
            k >>= 16;                                                                         \
            lo = k && k < lo ? k : lo;                                                        \
            hi = k && k >= hi ? k + 1 : hi;                                                   \
            hist_count[k] += 1;                                                               \
            hist_sq[k] += (double)ad * (double)ad;                                            \
        }                                                                                     \
        moved += m;                                                                           \
    }                                                                                         \
    hist_count[0] += n - moved;                                                               \
    uint32_t mx = 0;                                                                          \
    for (int j = 0; j < LANES; j++)                                                           \
        mx = top[j] > mx ? top[j] : mx;                                                       \
    float mxf;                                                                                \
    memcpy(&mxf, &mx, sizeof mxf);                                                            \
    out_i[0] = n; out_i[1] = changed; out_i[2] = n_atol; out_i[3] = n_rel; out_i[4] = bad;    \
    out_i[5] = odd[0]; out_i[6] = odd[1]; out_i[7] = odd[2]; out_i[8] = odd[3];               \
    out_i[9] = lo; out_i[10] = hi;                                                            \
    out_f[0] = combine(sq_u); out_f[1] = combine(sq_w); out_f[2] = mxf;                       \
}

STATS(stats_bf16, uint16_t, bits_bf16, one_bf16)
STATS(stats_f16, uint16_t, bits_f16, one_f16)
STATS(stats_f32, uint32_t, bits_f32, one_f32)

/* Two updates A, B of one base. out_i: n, changed_a, changed_b, changed_both, nonzero_both,
 * same_sign; out_f: sum da*db, sum da^2, sum db^2 (deltas 0 where the bits agree or where
 * the base or the delta is not finite) */
#define OVERLAP(NAME, T, BITS)                                                                \
void NAME(const T *base, const T *a, const T *b, int64_t n, const float *table,             \
          int64_t *out_i, double *out_f) {                                                    \
    v8d dot = {0}, sa = {0}, sb = {0};                                                        \
    v8i64 ca = {0}, cb = {0}, both = {0}, nz = {0}, same = {0};                               \
    T pad[3][LANES];                                                                          \
    for (int64_t i = 0; i < n; i += LANES) {                                                  \
        const T *p0 = base, *pa = a, *pb = b;                                                 \
        int64_t at = i;                                                                       \
        if (n - i < LANES) { /* tail: pad with the base (no change) */                        \
            for (int j = 0; j < LANES; j++) {                                                 \
                int in = i + j < n;                                                           \
                pad[0][j] = in ? base[i + j] : base[i];                                       \
                pad[1][j] = in ? a[i + j] : base[i];                                          \
                pad[2][j] = in ? b[i + j] : base[i];                                          \
            }                                                                                 \
            p0 = pad[0], pa = pad[1], pb = pad[2], at = 0;                                    \
        }                                                                                     \
        v8u32 u0 = BITS(p0, at, table), ua = BITS(pa, at, table), ub = BITS(pb, at, table);   \
        v8i32 cha = ua != u0, chb = ub != u0;                                                 \
        v8f x = (v8f)u0, da = (v8f)ua - x, db = (v8f)ub - x;                                  \
        v8i32 f0 = is_fin(u0);                                                                \
        da = (v8f)((v8u32)da & (v8u32)(cha & f0 & is_fin((v8u32)da)));                        \
        db = (v8f)((v8u32)db & (v8u32)(chb & f0 & is_fin((v8u32)db)));                        \
        v8i32 both_nz = (da != 0.0f) & (db != 0.0f);                                          \
        ca -= widen(cha); cb -= widen(chb); both -= widen(cha & chb); nz -= widen(both_nz);   \
        same -= widen(both_nz & ((da < 0.0f) == (db < 0.0f)));                                \
        add_products(&dot, da, db);                                                           \
        add_products(&sa, da, da);                                                            \
        add_products(&sb, db, db);                                                            \
    }                                                                                         \
    out_i[0] = n; out_i[1] = hsum(ca); out_i[2] = hsum(cb); out_i[3] = hsum(both);            \
    out_i[4] = hsum(nz); out_i[5] = hsum(same);                                               \
    out_f[0] = combine(dot); out_f[1] = combine(sa); out_f[2] = combine(sb);                  \
}

OVERLAP(overlap_bf16, uint16_t, bits_bf16)
OVERLAP(overlap_f16, uint16_t, bits_f16)
OVERLAP(overlap_f32, uint32_t, bits_f32)
