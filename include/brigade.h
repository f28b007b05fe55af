/* brigade: pipeline-parallel training for convolutional networks larger
 * than one GPU. This umbrella header includes the whole public API. */
#ifndef BRIGADE_H
#define BRIGADE_H

#include "brigade/status.h"
#include "brigade/tensor.h"
#include "brigade/arena.h"
#include "brigade/device.h"
#include "brigade/ops.h"
#include "brigade/check.h"
#include "brigade/data.h"
#include "brigade/loader.h"
#include "brigade/metrics.h"
#include "brigade/images.h"
#include "brigade/info.h"
#include "brigade/model.h"
#include "brigade/modelfile.h"
#include "brigade/zoo.h"
#include "brigade/import.h"
#include "brigade/train.h"
#include "brigade/schedule.h"
#include "brigade/program.h"
#include "brigade/plan.h"
#include "brigade/distributed.h"
#include "brigade/pipeline.h"
#include "brigade/trace.h"
#include "brigade/safetensors.h"
#include "brigade/checkpoint.h"

#endif /* BRIGADE_H */
