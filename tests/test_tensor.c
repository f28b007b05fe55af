/* Tensor descriptors: shapes, strides, views and arena-backed tensors. */
#include <stdint.h>
#include "testutil.h"

int main(void)
{
    float data[2 * 3 * 4 * 5];
    for (int i = 0; i < 120; i++) data[i] = (float)i;
    brg_tensor t = brg_tensor_nchw(data, 2, 3, 4, 5);
    CHECK(t.ndim == 4);
    CHECK(brg_tensor_numel(&t) == 120);
    CHECK(brg_tensor_bytes(&t) == 480);
    CHECK(t.stride[0] == 60 && t.stride[1] == 20 && t.stride[2] == 5 && t.stride[3] == 1);
    CHECK(brg_tensor_is_contiguous(&t));

    char s[64];
    CHECK(strcmp(brg_tensor_shape_string(&t, s, sizeof s), "[2, 3, 4, 5]") == 0);

    /* A batch slice is contiguous and points at sample 1. */
    brg_tensor v;
    CHECK_OK(brg_tensor_slice(&t, 0, 1, 1, &v));
    CHECK(v.shape[0] == 1 && brg_tensor_is_contiguous(&v));
    CHECK(((float *)v.data)[0] == 60.0f);

    /* A channel slice of a batch of two is strided, not contiguous. */
    CHECK_OK(brg_tensor_slice(&t, 1, 1, 2, &v));
    CHECK(v.shape[1] == 2 && !brg_tensor_is_contiguous(&v));
    CHECK(((float *)v.data)[0] == 20.0f);
    CHECK(((float *)v.data)[v.stride[0]] == 80.0f);
    CHECK_STATUS(brg_tensor_slice(&t, 1, 2, 2, &v), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("[2, 3, 4, 5]");
    CHECK_STATUS(brg_tensor_slice(&t, 4, 0, 1, &v), BRG_ERR_INVALID_ARGUMENT);
    /* start + length past INT64_MAX: refused (it wrapped and gave a view before the data) */
    CHECK_STATUS(brg_tensor_slice(&t, 0, INT64_MAX, 2, &v), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_tensor_slice(&t, 0, 1, INT64_MAX, &v), BRG_ERR_INVALID_ARGUMENT);
    /* a shape whose elements or bytes pass 64 bits: refused, as reshape's target too */
    const int64_t wide[4] = {(int64_t)1 << 32, (int64_t)1 << 32, 1, 1}, floats[1] = {(int64_t)1 << 62};
    CHECK_STATUS(brg_tensor_init(&v, NULL, BRG_F32, 4, wide, NULL), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_tensor_init(&v, NULL, BRG_F32, 1, floats, NULL), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_tensor_reshape(&t, 4, wide, &v), BRG_ERR_INVALID_ARGUMENT);

    /* Reshape keeps the data and checks the element count. */
    const int64_t flat[2] = {2, 60};
    CHECK_OK(brg_tensor_reshape(&t, 2, flat, &v));
    CHECK(v.ndim == 2 && v.stride[0] == 60 && v.data == t.data);
    const int64_t wrong[2] = {2, 61};
    CHECK_STATUS(brg_tensor_reshape(&t, 2, wrong, &v), BRG_ERR_SHAPE);
    CHECK_ERROR_HAS("[2, 61]");
    brg_tensor strided;
    CHECK_OK(brg_tensor_slice(&t, 1, 0, 2, &strided));
    CHECK_STATUS(brg_tensor_reshape(&strided, 2, flat, &v), BRG_ERR_INVALID_ARGUMENT);

    /* Bad descriptors. */
    const int64_t neg[2] = {2, -1};
    CHECK_STATUS(brg_tensor_init(&v, data, BRG_F32, 2, neg, NULL), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_tensor_init(&v, data, BRG_F32, 5, flat, NULL), BRG_ERR_INVALID_ARGUMENT);
    const int64_t one[1] = {7};
    CHECK_OK(brg_tensor_init(&v, data, BRG_I32, 1, one, NULL));
    CHECK(brg_tensor_bytes(&v) == 28);
    CHECK(brg_tensor_same_shape(&t, &t) && !brg_tensor_same_shape(&t, &v));

    /* Arena-backed tensors count against the device and come back on free. */
    brg_device *dev = NULL;
    CHECK_OK(brg_device_create_cpu(1 << 20, 0, &dev));
    if (dev) {
        brg_tensor a;
        const int64_t shape[4] = {4, 3, 10, 10};
        CHECK_OK(brg_tensor_alloc(dev, BRG_F32, 4, shape, "test / activations", &a));
        CHECK(a.device == dev && a.data != NULL);
        CHECK(brg_device_in_use(dev) == brg_arena_rounded(4 * 3 * 10 * 10 * 4));
        brg_tensor_free(&a);
        CHECK(a.data == NULL);
        CHECK(brg_device_in_use(dev) == 0);
        const int64_t huge[4] = {1024, 1024, 1, 1};
        CHECK_STATUS(brg_tensor_alloc(dev, BRG_F32, 4, huge, "test / too big", &a), BRG_ERR_OUT_OF_MEMORY);
        CHECK_ERROR_HAS("test / too big");
        /* 2^62 floats: 2^64 bytes wrapped to 0, and a 256-byte block was lent */
        const int64_t wrapping[1] = {(int64_t)1 << 62};
        CHECK_STATUS(brg_tensor_alloc(dev, BRG_F32, 1, wrapping, "test / wraps", &a), BRG_ERR_INVALID_ARGUMENT);
        CHECK(brg_device_in_use(dev) == 0);
        brg_tensor_free(&a); /* a zeroed tensor is accepted */
        brg_device_destroy(dev);
    }
    TEST_EXIT();
}
