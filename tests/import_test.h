/* Shared by the import tests (test_onnx_nodes, test_import): an imported
 * model's outputs on one CPU device with the import's weights. */
#ifndef BRIGADE_IMPORT_TEST_H
#define BRIGADE_IMPORT_TEST_H

#include <stdlib.h>
#include <string.h>

#include "brigade/import.h"
#include "pipeline_test.h"

/* The outputs (n x the output tensor's size) of the imported model on
 * the n samples of x, through brg_pipeline_predict on one CPU device,
 * every parameter written from the import's weights. */
static inline brg_status import_predict(const brg_import *imp, const float *x, int n, float *out)
{
    const brg_model *m = brg_import_model(imp);
    brg_schedule *sched = NULL;
    brg_device *dev = NULL;
    brg_pipeline *pl = NULL;
    brg_status st = brg_schedule_build(BRG_SCHEDULE_GPIPE, 1, 1, 1, &sched);
    if (st == BRG_OK) st = test_cpu_device(64 * MiB, 0, &dev);
    if (st == BRG_OK) {
        brg_device_part part = even_part(m, 1, 1, 0, 0);
        brg_pipeline_desc desc;
        memset(&desc, 0, sizeof desc);
        desc.model = m;
        desc.schedule = sched;
        desc.parts = &part;
        desc.micro_batch = n;
        desc.optimizer = brg_optimizer_config_init(BRG_OPTIMIZER_SGD);
        st = brg_pipeline_create(&desc, &dev, 1, NULL, &pl);
    }
    for (int i = 0; st == BRG_OK && i < brg_import_weight_count(imp); i++) {
        brg_import_weight w;
        st = brg_import_get_weight(imp, i, &w);
        if (st == BRG_OK && !w.values) st = BRG_ERR_INVALID_ARGUMENT;
        if (st == BRG_OK) st = brg_pipeline_write_state(pl, w.layer, w.param, -1, w.values, (size_t)w.count);
    }
    if (st == BRG_OK) st = brg_pipeline_predict(pl, x, n, out);
    brg_pipeline_destroy(pl);
    brg_schedule_destroy(sched);
    brg_device_destroy(dev);
    return st;
}

#endif /* BRIGADE_IMPORT_TEST_H */
