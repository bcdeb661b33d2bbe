// Intentionally empty: the C target exists for its header.
#include "CSystem.h"
