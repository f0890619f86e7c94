#pragma once
// Budget output: a terminal table for people, JSON for scripts, and the per-format comparison.
#include <string>

#include <nlohmann/json.hpp>

#include "mo/budget/budget.h"

namespace mo::budget {

std::string format_table(const BudgetRequest& req, const BudgetResult& res);
nlohmann::json to_json(const BudgetRequest& req, const BudgetResult& res);

// One row per weight format, same model, GPU and settings.
std::string format_comparison(const BudgetRequest& req);
nlohmann::json comparison_json(const BudgetRequest& req);

}  // namespace mo::budget
