"""Helpers the tests share: fixtures that write results, trees and files as the stages would."""
