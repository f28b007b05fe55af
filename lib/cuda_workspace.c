/* brigade: cuda_workspace (being written). */
#include "internal.h"
