/* iris: the engine library's C API.
 *
 * Opens `.iris` archives (formats/FORMAT.md), lists their tensors with every descriptor field
 * an engine needs to run its own kernels on the mapped bytes, checks checksums, and
 * dequantizes on the CPU bit for bit as `iris export` does. The CUDA half (upload, device
 * dequant, fused GEMV) is in iris_cuda.h.
 *
 * Conventions (docs/API.md has the full rules):
 *  - Every fallible call returns an iris_status and takes (char* msg, size_t msg_size) last:
 *    on an error, one line naming the file, the tensor and what is wrong is written there
 *    (always NUL-terminated, truncated to fit; msg may be NULL).
 *  - Handles are opaque. Pointers returned by the library (names, component data) stay valid
 *    until the archive is closed. Plain-data structs are filled by the library.
 *  - An open archive is immutable: any number of threads may call any function on it at once,
 *    except iris_archive_close, which must not race with anything else on that archive.
 *  - No call prints, aborts or exits; a malformed file gives an error status.
 */
#ifndef IRIS_IRIS_H_
#define IRIS_IRIS_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define IRIS_API
#elif defined(IRIS_BUILDING_LIBRARY)
#define IRIS_API __attribute__((visibility("default")))
#else
#define IRIS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a declaration here or in iris_cuda.h changes incompatibly (docs/API.md,
 * "Stability"). The shared library's soname carries the same number: libiris.so.1. */
#define IRIS_ABI_VERSION 1

/* The ABI version the loaded library implements; compare with IRIS_ABI_VERSION. */
IRIS_API uint32_t iris_abi_version(void);
/* The library's release, e.g. "0.3.0". */
IRIS_API const char* iris_version_string(void);
/* 1 when the library was built with the CUDA kernels (iris_cuda.h), 0 otherwise. */
IRIS_API int iris_has_cuda(void);

/* Every enum below holds the full int range (the _INT_MIN_/_INT_MAX_ sentinels, as Vulkan's
 * _MAX_ENUM): a caller may pass any int, and the library answers "unknown"/an error for values
 * it does not know, without undefined behaviour in its C++ implementation. */

typedef enum iris_status {
  IRIS_OK = 0,
  IRIS_ERR_INVALID_ARGUMENT = 1, /* the caller's arguments are wrong (NULL handle, bad index, ...) */
  IRIS_ERR_INVALID_INPUT = 2,    /* the file is malformed or inconsistent */
  IRIS_ERR_CORRUPT = 3,          /* a checksum does not match: the bytes were damaged */
  IRIS_ERR_IO = 4,               /* the OS refused a read, a mapping, ... */
  IRIS_ERR_UNSUPPORTED = 5,      /* valid, but this build cannot do it (format, layout, dtype) */
  IRIS_ERR_NOT_FOUND = 6,        /* no tensor / component / file of that name */
  IRIS_ERR_BUFFER_TOO_SMALL = 7, /* the caller's output buffer is smaller than needed */
  IRIS_ERR_NO_DEVICE = 8,        /* no usable GPU, or a build without CUDA */
  IRIS_ERR_DEVICE = 9,           /* the CUDA runtime reported an error (out of memory, ...) */
  IRIS_ERR_OUT_OF_MEMORY = 10,   /* host memory ran out */
  IRIS_ERR_INTERNAL = 11,         /* a bug in iris: please report it */
  IRIS_STATUS_INT_MIN_ = -0x7fffffff - 1,
  IRIS_STATUS_INT_MAX_ = 0x7fffffff
} iris_status;

/* A short constant name for a status, e.g. "IRIS_ERR_CORRUPT". */
IRIS_API const char* iris_status_name(iris_status status);

/* XXH3-64 (seed 0) of `size` bytes: the checksum the manifest records for every component
 * and file, for engines that verify their own copies (and readers without an xxHash). */
IRIS_API uint64_t iris_xxh3_64(const void* data, size_t size);

/* Element types (FORMAT.md "Element types"). */
typedef enum iris_dtype {
  IRIS_DTYPE_BOOL = 0,
  IRIS_DTYPE_U8 = 1,
  IRIS_DTYPE_I8 = 2,
  IRIS_DTYPE_U16 = 3,
  IRIS_DTYPE_I16 = 4,
  IRIS_DTYPE_U32 = 5,
  IRIS_DTYPE_I32 = 6,
  IRIS_DTYPE_U64 = 7,
  IRIS_DTYPE_I64 = 8,
  IRIS_DTYPE_F16 = 9,
  IRIS_DTYPE_BF16 = 10,
  IRIS_DTYPE_F32 = 11,
  IRIS_DTYPE_F64 = 12,
  IRIS_DTYPE_F8_E4M3 = 13,
  IRIS_DTYPE_F8_E5M2 = 14,
  IRIS_DTYPE_OTHER = 255, /* a safetensors type without an enumerator here (C64, F4, F6, ...) */
  IRIS_DTYPE_INT_MIN_ = -0x7fffffff - 1,
  IRIS_DTYPE_INT_MAX_ = 0x7fffffff
} iris_dtype;

/* The archive name of a dtype ("bf16"), and its width in bits (0 for IRIS_DTYPE_OTHER). */
IRIS_API const char* iris_dtype_name(iris_dtype dtype);
IRIS_API uint32_t iris_dtype_bits(iris_dtype dtype);

typedef enum iris_format {
  IRIS_FORMAT_RAW = 0,      /* unquantized: one "data" component of the tensor's dtype */
  IRIS_FORMAT_MXFP4 = 1,    /* OCP MXFP4: E2M1 codes + E8M0 scales per 32 */
  IRIS_FORMAT_NF4 = 2,      /* bitsandbytes NF4, optionally double-quantized absmax */
  IRIS_FORMAT_BNB_FP4 = 3,  /* bitsandbytes FP4 */
  IRIS_FORMAT_FP8_E4M3 = 4,  /* FP8 E4M3 with tensor / channel / block / group scales */
  IRIS_FORMAT_INT_GROUP = 5, /* 2/3/4/8-bit integer codes, a scale (and zero point) per group of columns (GPTQ, AWQ, compressed-tensors) */
  IRIS_FORMAT_NVFP4 = 6,     /* NVFP4: E2M1 codes, E4M3 scales per 16, an F32 scale per matrix (ModelOpt, compressed-tensors) */
  IRIS_FORMAT_INT_MIN_ = -0x7fffffff - 1,
  IRIS_FORMAT_INT_MAX_ = 0x7fffffff
} iris_format;

IRIS_API const char* iris_format_name(iris_format format);

typedef enum iris_layout_kind {
  IRIS_LAYOUT_ROW_MAJOR = 0, /* raw tensors */
  IRIS_LAYOUT_TILED = 1,     /* codes in tile_n x tile_k tiles (FORMAT.md section 5) */
  IRIS_LAYOUT_FLAT = 2,       /* codes as one flat sequence (bitsandbytes blocks across rows) */
  IRIS_LAYOUT_KIND_INT_MIN_ = -0x7fffffff - 1,
  IRIS_LAYOUT_KIND_INT_MAX_ = 0x7fffffff
} iris_layout_kind;

typedef enum iris_scale_granularity {
  IRIS_SCALE_TENSOR = 0,  /* one scale per [N, K] matrix */
  IRIS_SCALE_CHANNEL = 1, /* one per row */
  IRIS_SCALE_BLOCK = 2,   /* one per block_n x block_k tile */
  IRIS_SCALE_GROUP = 3,    /* one per group_size elements of a row */
  IRIS_SCALE_GRANULARITY_INT_MIN_ = -0x7fffffff - 1,
  IRIS_SCALE_GRANULARITY_INT_MAX_ = 0x7fffffff
} iris_scale_granularity;

/* The components a tensor's bytes are split into (FORMAT.md "Components"). */
typedef enum iris_role {
  IRIS_ROLE_DATA = 0,              /* raw tensor bytes */
  IRIS_ROLE_CODES = 1,             /* packed quantized codes */
  IRIS_ROLE_SCALES = 2,            /* MXFP4 E8M0 bytes; FP8 scales of scale_dtype */
  IRIS_ROLE_ABSMAX = 3,            /* bitsandbytes absmax (F32, or U8 codes when double-quantized) */
  IRIS_ROLE_NESTED_ABSMAX = 4,     /* bitsandbytes double quantization: F32 */
  IRIS_ROLE_CODE_TABLE = 5,        /* bitsandbytes 16-entry code book (F32) */
  IRIS_ROLE_NESTED_CODE_TABLE = 6, /* bitsandbytes 256-entry absmax code book (F32) */
  IRIS_ROLE_QUANT_STATE = 7,        /* bitsandbytes quant_state JSON bytes, kept for export */
  IRIS_ROLE_ZERO_POINTS = 8,        /* int_group: U8 zero point per group */
  IRIS_ROLE_PERMUTATION = 9,        /* int_group with act_order: U32 [K], stored column j is logical column perm[j] */
  IRIS_ROLE_TENSOR_SCALE = 10,      /* nvfp4: F32, one per matrix (multiplied or divided: IRIS_NVFP4_*) */
  IRIS_ROLE_INT_MIN_ = -0x7fffffff - 1,
  IRIS_ROLE_INT_MAX_ = 0x7fffffff
} iris_role;

IRIS_API const char* iris_role_name(iris_role role);

#define IRIS_MAX_DIMS 16

typedef struct iris_layout {
  iris_layout_kind kind;
  uint64_t tile_n, tile_k;     /* IRIS_LAYOUT_TILED only */
  uint64_t padded_n, padded_k; /* rows and columns of each [N, K] matrix after padding to tiles */
} iris_layout;

/* Typed format parameters; fields that do not apply to `format` are zero. */
typedef struct iris_format_params {
  uint32_t block_size;        /* MXFP4: 32; NF4/FP4: elements per absmax */
  /* NF4 / bitsandbytes FP4 */
  int32_t double_quant;       /* 1 when absmax is stored as U8 codes with a nested absmax */
  uint32_t nested_block_size; /* absmax codes per nested absmax */
  float nested_offset;        /* added to each decoded absmax */
  uint64_t quant_state_bytes; /* size of the IRIS_ROLE_QUANT_STATE component (0: none) */
  /* FP8 */
  iris_scale_granularity granularity;
  iris_dtype scale_dtype;     /* F32, BF16 or F16 */
  uint64_t block_n, block_k;  /* IRIS_SCALE_BLOCK */
  uint64_t group_size;        /* IRIS_SCALE_GROUP; int_group: columns a group */
  /* int_group (scale_dtype and group_size above) */
  uint32_t code_bits;         /* 2, 3, 4 or 8 */
  uint32_t int_group_flags;   /* IRIS_INT_GROUP_ZERO_POINTS | IRIS_INT_GROUP_ACT_ORDER */
  /* nvfp4 (block_size above: 16) */
  uint32_t nvfp4_flags;       /* IRIS_NVFP4_TENSOR_SCALE_DIVIDES | IRIS_NVFP4_NEGATIVE_ZERO */
  /* int_group: each value is multiplied by this FP32 constant after its scale, a second
   * rounding: 1 for every scheme but bitsandbytes LLM.int8 (its 1/127, FORMAT.md 4.5). It took
   * the place of a reserved word: a libiris from before this field leaves 0 here, which means 1. */
  float int_group_post_factor;
  uint64_t reserved[2];
} iris_format_params;

#define IRIS_INT_GROUP_ZERO_POINTS 1u /* an IRIS_ROLE_ZERO_POINTS component; else every zero point is 2^(bits-1) */
#define IRIS_INT_GROUP_ACT_ORDER 2u   /* an IRIS_ROLE_PERMUTATION component */
#define IRIS_NVFP4_TENSOR_SCALE_DIVIDES 1u /* block scale = e4m3 / tensor_scale (compressed-tensors); else e4m3 * tensor_scale (ModelOpt) */
#define IRIS_NVFP4_NEGATIVE_ZERO 2u        /* code 8 decodes to -0.0 (compressed-tensors); else +0.0 (ModelOpt) */

typedef struct iris_tensor_info {
  const char* name;           /* NUL-terminated, owned by the archive */
  uint32_t ndim;
  uint64_t shape[IRIS_MAX_DIMS]; /* logical shape; weights are [..., N, K] with N the output */
  uint64_t numel;
  iris_dtype dtype;           /* what dequantization produces (the source's float type) */
  iris_format format;
  iris_format_params params;
  iris_layout layout;
  uint32_t n_components;
  uint64_t rows;              /* numel / K: the row count of iris_dequantize_rows (0 if numel is 0) */
  uint64_t reserved[4];
} iris_tensor_info;

typedef struct iris_component_info {
  iris_role role;
  iris_dtype dtype;
  uint32_t ndim;
  uint64_t shape[IRIS_MAX_DIMS];
  uint64_t file_offset;  /* absolute offset in the file that holds it (a multiple of 4096) */
  uint64_t size;         /* bytes */
  uint64_t xxh3;         /* XXH3-64 of the bytes, as recorded in the manifest */
  const void* data;      /* into the read-only mapping; valid until iris_archive_close */
  uint32_t file;         /* that file: 0 for a single archive, else the archive set's member
                            (iris_archive_data_file_path names it) */
  uint32_t reserved32;
  uint64_t reserved[1];
} iris_component_info;

typedef struct iris_archive iris_archive;

/* Flags of iris_archive_open. */
#define IRIS_OPEN_VERIFY 1u /* hash every component and embedded file before returning */

/* Maps `path` read-only and validates everything that can be validated without reading the
 * tensor data: preamble, manifest checksum, every descriptor, offset, size and overlap. With
 * IRIS_OPEN_VERIFY, also every checksum (IRIS_ERR_CORRUPT on a mismatch). `path` may be an
 * archive set's index (FORMAT.md section 10, `iris convert --max-file-size`): the set opens
 * as one archive, every member mapped and checked against the index (an error names a member
 * that is missing, replaced or of another set). */
IRIS_API iris_status iris_archive_open(const char* path, uint32_t flags, iris_archive** out, char* msg, size_t msg_size);
/* Unmaps and frees; NULL is a no-op. Pointers obtained from the archive become invalid. */
IRIS_API void iris_archive_close(iris_archive* archive);

IRIS_API const char* iris_archive_path(const iris_archive* archive);
/* config.json's model_type, "" when the archive records none. */
IRIS_API const char* iris_archive_model_type(const iris_archive* archive);
/* The manifest as the archive stores it (JSON text, not NUL-terminated; *size receives its length).
 * Of an archive set, the index's: the set record and embedded files, no tensors. */
IRIS_API const char* iris_archive_manifest(const iris_archive* archive, size_t* size);
/* The files an archive is made of: 1 for a single archive; for an archive set, 1 + its members
 * (file 0 is the index, holding the embedded files; iris_component_info.file indexes these). */
IRIS_API uint32_t iris_archive_data_file_count(const iris_archive* archive);
/* The path of file `file` (0: the path opened); NULL if out of range. */
IRIS_API const char* iris_archive_data_file_path(const iris_archive* archive, uint32_t file);
/* Archive format version (2.x for this library; of an archive set, its index's). */
IRIS_API void iris_archive_format_version(const iris_archive* archive, uint32_t* major, uint32_t* minor);

IRIS_API uint64_t iris_archive_tensor_count(const iris_archive* archive);
/* The index of the tensor called `name` (O(1)); IRIS_ERR_NOT_FOUND if there is none. */
IRIS_API iris_status iris_archive_find_tensor(const iris_archive* archive, const char* name, uint64_t* index,
                                              char* msg, size_t msg_size);
IRIS_API iris_status iris_archive_tensor_info(const iris_archive* archive, uint64_t index, iris_tensor_info* info,
                                              char* msg, size_t msg_size);
/* Component `component` (0 <= component < info.n_components) of tensor `index`. */
IRIS_API iris_status iris_archive_component(const iris_archive* archive, uint64_t index, uint32_t component,
                                            iris_component_info* info, char* msg, size_t msg_size);
/* The component of tensor `index` with role `role`; IRIS_ERR_NOT_FOUND if it has none. */
IRIS_API iris_status iris_archive_find_component(const iris_archive* archive, uint64_t index, iris_role role,
                                                 iris_component_info* info, char* msg, size_t msg_size);

/* Embedded files (config.json, tokenizer files, ...). */
IRIS_API uint64_t iris_archive_file_count(const iris_archive* archive);
IRIS_API const char* iris_archive_file_name(const iris_archive* archive, uint64_t index); /* NULL if out of range */
/* Decompresses embedded file `name` after checking its checksum. Call with buffer = NULL to
 * learn the size (*size); IRIS_ERR_BUFFER_TOO_SMALL if buffer_size < *size. */
IRIS_API iris_status iris_archive_read_file(const iris_archive* archive, const char* name, void* buffer,
                                            size_t buffer_size, size_t* size, char* msg, size_t msg_size);

/* Hashes every component of tensor `index` (XXH3-64) and compares with the manifest:
 * IRIS_ERR_CORRUPT naming the first component that differs. */
IRIS_API iris_status iris_tensor_verify(const iris_archive* archive, uint64_t index, char* msg, size_t msg_size);
/* Every tensor and embedded file, as iris_tensor_verify; `threads` <= 0 picks the core count. */
IRIS_API iris_status iris_archive_verify(const iris_archive* archive, int threads, char* msg, size_t msg_size);

/* Dequantizes rows [row_begin, row_end) of tensor `index`, viewed as [rows, K] row-major
 * (info.rows), into `out` as F32, F16 or BF16: (row_end - row_begin) * K elements, which
 * must fit in out_size bytes. Bit for bit what `iris export --dtype` writes: the CPU
 * reference codecs, each value rounded once to the output type. Raw float tensors are
 * converted; raw integer tensors give IRIS_ERR_UNSUPPORTED. `threads` <= 0 picks the core
 * count. Does not verify checksums (iris_tensor_verify does). */
IRIS_API iris_status iris_dequantize_rows(const iris_archive* archive, uint64_t index, uint64_t row_begin,
                                          uint64_t row_end, iris_dtype out_dtype, void* out, size_t out_size,
                                          int threads, char* msg, size_t msg_size);
/* The whole tensor: iris_dequantize_rows over [0, info.rows). */
IRIS_API iris_status iris_dequantize(const iris_archive* archive, uint64_t index, iris_dtype out_dtype, void* out,
                                     size_t out_size, int threads, char* msg, size_t msg_size);

#ifdef __cplusplus
}
#endif

#endif /* IRIS_IRIS_H_ */
