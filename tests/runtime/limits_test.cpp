#include "sandbox_fixture.hpp"
