/*
 * A C library that hands out its arrays as DLPack managed tensors (DLPack 1.x, versioned),
 * exactly as any C or C++ producer does: the data and the shape are malloc'ed, and the
 * deleter frees them and records that it ran.
 *
 * The struct layouts are those of dlpack.h (DLPack 1.x); they are repeated here so that the
 * example needs no header from elsewhere.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct {
    int32_t device_type; /* an enum in dlpack.h: kDLCPU = 1 */
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code; /* kDLFloat = 2 */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: C-contiguous (row-major) */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* What the producer allocates for one tensor, freed by the deleter. */
typedef struct {
    DLManagedTensorVersioned managed;
    int64_t shape[2];
    int64_t strides[2];
    atomic_int *deletions; /* the caller's counter, incremented once by the deleter */
} Allocation;

static void delete_allocation(DLManagedTensorVersioned *self) {
    Allocation *allocation = (Allocation *)self->manager_ctx;
    /* a deleter may be called from any thread */
    atomic_fetch_add(allocation->deletions, 1);
    free(self->dl_tensor.data);
    free(allocation);
}

/*
 * A rows x cols float32 matrix holding value(r, c) = 10 * r + c.
 * `transposed` != 0 stores it column-major (strides {1, rows}): a tensor that is not
 * C-contiguous. `deletions` is incremented by the deleter. NULL for a negative dimension or
 * when out of memory.
 */
DLManagedTensorVersioned *producer_matrix(int64_t rows, int64_t cols, int transposed,
                                          atomic_int *deletions) {
    if (rows < 0 || cols < 0) {
        return NULL;
    }
    Allocation *allocation = malloc(sizeof(Allocation));
    /* malloc(0) may return NULL: ask for at least one element */
    size_t count = (size_t)(rows * cols);
    float *data = malloc((count ? count : 1) * sizeof(float));
    if (allocation == NULL || data == NULL) {
        free(allocation);
        free(data);
        return NULL;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) {
            int64_t at = transposed ? c * rows + r : r * cols + c;
            data[at] = (float)(10 * r + c);
        }
    }
    allocation->shape[0] = rows;
    allocation->shape[1] = cols;
    allocation->strides[0] = transposed ? 1 : cols;
    allocation->strides[1] = transposed ? rows : 1;
    allocation->deletions = deletions;

    DLManagedTensorVersioned *managed = &allocation->managed;
    managed->version.major = 1;
    managed->version.minor = 0;
    managed->manager_ctx = allocation;
    managed->deleter = delete_allocation;
    managed->flags = 0;
    managed->dl_tensor.data = data;
    managed->dl_tensor.device.device_type = 1; /* kDLCPU */
    managed->dl_tensor.device.device_id = 0;
    managed->dl_tensor.ndim = 2;
    managed->dl_tensor.dtype.code = 2; /* kDLFloat */
    managed->dl_tensor.dtype.bits = 32;
    managed->dl_tensor.dtype.lanes = 1;
    managed->dl_tensor.shape = allocation->shape;
    managed->dl_tensor.strides = allocation->strides;
    managed->dl_tensor.byte_offset = 0;
    return managed;
}
