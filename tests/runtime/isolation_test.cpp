// Attacks run as root inside a sandbox; each must fail.
#include "sandbox_fixture.hpp"
